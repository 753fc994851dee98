"""The image-folder reader: `ROOT/DOMAIN/CLASS/*.png|jpg|jpeg`, one record per image."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from robustvlm.data.loaders.raw import RawRecord
from robustvlm.errors import DataError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def folder_rows(root: Path, template: str) -> Iterator[RawRecord]:
    """`ROOT/DOMAIN/CLASS/*.png|jpg|jpeg`: env = domain, target = class (underscores -> spaces)."""
    files = sorted(p for p in root.glob("*/*/*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not files:
        raise DataError("no images found; expected ROOT/DOMAIN/CLASS/*.png|jpg|jpeg", str(root))
    for file in files:
        domain, label = file.parent.parent.name, file.parent.name
        rel = file.relative_to(root).as_posix()
        record = {
            "id": rel,
            "image": rel,  # relative to `root`, the row's base_dir
            "instruction": template.replace("{domain}", domain),
            "target": label.replace("_", " "),
            "env": domain,
        }
        # Found by listing ROOT, not named by a data file: a symlinked domain folder is fine.
        yield RawRecord(record, str(root), rel, root, allow_outside_root=True)
