"""Per-row JSONL files that runs append to as they go, and read back to resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from robustvlm.errors import DataError


def read_appended_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file a run appends to ([] when there is none yet).

    A torn last line (a killed run: no newline after it, not valid JSON) is dropped and the file
    rewritten without it, so appending continues cleanly. Any other unreadable line is a
    DataError naming the file and line: it is damage, not an interruption, and is never dropped.
    """
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    complete, last = lines[:-1], lines[-1]  # `last` is "" when the file ends with a newline
    rows = []
    for number, line in enumerate(complete, start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"line {number} is not valid JSON ({exc})", str(path), number) from exc
    if last.strip():
        try:
            rows.append(json.loads(last))
        except json.JSONDecodeError:
            pass  # torn by an interrupted write
        path.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
    return rows
