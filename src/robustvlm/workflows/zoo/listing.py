"""`robustvlm zoo list`: every recipe with its key and, when built, what its `zoo_member.json`
says. Reads recipes and small JSON files only: no model, torch or transformers is imported, so
listing takes a fraction of a second (issue 46.8: it used to import the builder)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from robustvlm.model_ref import ModelRef
from robustvlm.models.zoo_recipes import QUICK, QUICK_ZOO2, QUICK_ZOO3, RECIPES, member_dir

#: the file a finished member's folder holds (its card as data); its presence means "built"
MEMBER_FILE = "zoo_member.json"
#: a member's weights, whose sha256 its card records
WEIGHTS_FILE = "model.safetensors"


def read_info(folder: Path) -> dict:
    """The `zoo_member.json` of a built member's folder."""
    return json.loads((folder / MEMBER_FILE).read_text(encoding="utf-8"))


def member_state(folder: Path) -> tuple[dict | None, str]:
    """(the card of the member built in `folder`, "") when it is whole; (None, what is damaged)
    when its card does not read or its weights do not match the hash the card records; (None, "")
    when it is not built. Cards written before the hash was recorded are taken as they are."""
    card = folder / MEMBER_FILE
    if not card.is_file():
        return None, ""
    try:
        info = read_info(folder)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return None, f"{card} does not read ({err.__class__.__name__}: {err})"
    recorded = info.get("weights_sha256") if isinstance(info, dict) else None
    weights = folder / WEIGHTS_FILE
    if recorded is not None and (not weights.is_file() or sha256_of(weights) != recorded):
        return None, f"{weights} does not match the sha256 its {MEMBER_FILE} records"
    return info, ""


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def zoo_listing() -> list[dict]:
    """One row per recipe: name, arch, key, built, held-out accuracy, CPU seconds, folder."""
    rows = []
    for r in RECIPES.values():
        folder = member_dir(r)
        info, damage = member_state(folder)
        if damage:
            print(f"{ModelRef.zoo(r.name).name}: {damage}; `robustvlm zoo build --members {r.name}` rebuilds it", file=sys.stderr)
        rows.append({
            "name": r.name, "arch": r.arch, "key": r.key(), "set": "quick" if r in (*QUICK, *QUICK_ZOO2, *QUICK_ZOO3) else "full",
            "built": "damaged" if damage else info is not None,
            "heldout_accuracy": info["heldout_accuracy"] if info else None,
            "cpu_seconds": info["cpu_seconds"] if info else None, "folder": str(folder),
        })
    return rows
