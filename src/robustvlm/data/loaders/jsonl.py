"""The JSONL reader: one record a line (`data.jsonl` in a folder)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from robustvlm.data.loaders.raw import RawRecord
from robustvlm.errors import DataError


def jsonl_rows(path: Path) -> Iterator[RawRecord | DataError]:
    file = str(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DataError(f"cannot read data file ({exc.strerror})", file) from exc
    with handle:
        for line_no, raw in enumerate(handle, 1):
            try:
                text = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield DataError(f"not valid UTF-8 text (byte {exc.start} of the line)", file, line_no)
                continue
            if not text.strip():
                continue
            try:
                yield RawRecord(json.loads(text), file, line_no, path.parent)
            except json.JSONDecodeError as exc:
                yield DataError(f"invalid JSON ({exc.msg}, column {exc.colno})", file, line_no)
