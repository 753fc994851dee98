"""`robustvlm zoo list`: every recipe with its key and, when built, what its `zoo_member.json`
says. Reads recipes and small JSON files only: no model, torch or transformers is imported, so
listing takes a fraction of a second (issue 46.8: it took 17 s importing the builder)."""

from __future__ import annotations

import json
from pathlib import Path

from robustvlm.models.zoo_recipes import QUICK, RECIPES, member_dir

#: the file a finished member's folder holds (its card as data); its presence means "built"
MEMBER_FILE = "zoo_member.json"


def read_info(folder: Path) -> dict:
    """The `zoo_member.json` of a built member's folder."""
    return json.loads((folder / MEMBER_FILE).read_text(encoding="utf-8"))


def zoo_listing() -> list[dict]:
    """One row per recipe: name, arch, key, built, held-out accuracy, CPU seconds, folder."""
    rows = []
    for r in RECIPES.values():
        folder = member_dir(r)
        info = read_info(folder) if (folder / MEMBER_FILE).is_file() else None
        rows.append({
            "name": r.name, "arch": r.arch, "key": r.key(), "set": "quick" if r in QUICK else "full",
            "built": info is not None,
            "heldout_accuracy": info["heldout_accuracy"] if info else None,
            "cpu_seconds": info["cpu_seconds"] if info else None, "folder": str(folder),
        })
    return rows
