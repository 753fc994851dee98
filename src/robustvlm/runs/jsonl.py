"""Per-row outputs: JSONL files a run appends to one row at a time, read back to resume (a torn last
line dropped), and JSONL files a user gives as input (read, never repaired)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from robustvlm.errors import DataError


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file a run appends to ([] when there is none yet); see the module doc."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    complete, last = lines[:-1], lines[-1]  # `last` is b"" when the file ends with a newline
    rows = []
    for number, line in enumerate(complete, start=1):
        if line.strip():
            try:
                rows.append(json.loads(line.decode("utf-8")))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise DataError(f"line {number} is not valid JSON ({exc})", str(path), number) from exc
    if last.strip():
        try:
            rows.append(json.loads(last.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass  # torn by an interrupted write, possibly inside a multi-byte character
        write_jsonl(path, rows)
    return rows


def read_input_jsonl(path: str | Path, what: str = "JSONL file") -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of every row of a JSONL file the user gives as input.

    Inputs are read-only: unlike `read_jsonl`, nothing is ever repaired. A missing file, a line
    that is not a JSON object, or a torn last line is a DataError naming the file and line;
    blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} not found" if not path.exists() else f"{what} is not a file", str(path))
    rows = []
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"not valid JSON ({exc}); a cut last line means the file is incomplete",
                            str(path), number) from exc
        if not isinstance(row, dict):
            raise DataError("not a JSON object", str(path), number)
        rows.append((number, row))
    return rows


def append_jsonl(handle: IO[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Append rows to an open JSONL file and flush, so a kill loses at most the row in flight."""
    for row in rows:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    handle.flush()


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace a JSONL file atomically (written to a temporary name, then renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    tmp.replace(path)
