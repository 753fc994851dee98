"""Reading another tool's results file as text, safely: a regular file of at most
`MAX_BYTES` (a device such as /dev/zero, or a file grown past the cap, is refused before it is
read), UTF-8 (a byte that is not is refused naming its line), and CSV rows as long as their header
(a short or long row, such as the cut last row of a truncated file, is refused naming its line).
Every refusal is one DataError naming the file."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from pathlib import Path

from robustvlm.errors import DataError

#: the largest results file read (bytes); the tools' files are kilobytes to tens of megabytes
MAX_BYTES = 256 * 1024 * 1024


def check_regular(path: Path, what: str) -> None:
    """DataError unless `path` is a regular file of at most MAX_BYTES."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise DataError(f"cannot read the {what}: {err.strerror or err}", str(path)) from None
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"the {what} is not a regular file (a device, a pipe or a folder)", str(path))
    if info.st_size > MAX_BYTES:
        raise DataError(f"the {what} holds {info.st_size} bytes, more than the {MAX_BYTES} read", str(path))


def read_bytes(path: Path, what: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file `path`, its first `limit` bytes at most (DataError for anything
    but a regular file, or a file over MAX_BYTES)."""
    check_regular(path, what)
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1 if limit == MAX_BYTES else limit)
    except OSError as err:
        raise DataError(f"cannot read the {what}: {err.strerror or err}", str(path)) from None
    if len(data) > MAX_BYTES:
        raise DataError(f"the {what} grew past the {MAX_BYTES} bytes read", str(path))
    return data


def read_text(path: Path, what: str) -> str:
    """The file as UTF-8 text (a leading byte-order mark dropped); a byte that is not UTF-8 is a
    DataError naming its line."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise DataError(f"the {what} is not UTF-8 (byte 0x{data[err.start]:02x}); save it as UTF-8",
                        str(path), line) from None


def read_json(path: Path, what: str) -> object:
    """The file parsed as JSON (DataError naming the line of a syntax error)."""
    try:
        return json.loads(read_text(path, what))
    except json.JSONDecodeError as err:
        raise DataError(f"the {what} is not valid JSON ({err.msg}); a cut file is incomplete", str(path),
                        err.lineno) from None


def csv_records(path: Path, what: str) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(line, {column: cell})]) of a CSV file; blank lines are skipped; a row with more or
    fewer cells than the header is a DataError naming its line (a cut last row says so)."""
    text = read_text(path, what)
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(rows, None)
        if not header:
            raise DataError(f"the {what} is empty", str(path))
        out = []
        for cells in rows:
            if not cells:
                continue
            if len(cells) != len(header):
                cut = " (the last row: the file looks cut short)" if rows.line_num == _last_line(text) else ""
                raise DataError(f"a row of {len(cells)} cells under a header of {len(header)}{cut}", str(path),
                                rows.line_num)
            out.append((rows.line_num, dict(zip(header, cells))))
    except csv.Error as err:
        raise DataError(f"the {what} is not a readable CSV ({err})", str(path), rows.line_num) from None
    return header, out


def csv_header(path: Path, delimiter: str = ",") -> list[str] | None:
    """The header of a .csv file (a .tsv with `delimiter` tab) for a format detector (None when it
    cannot be read; a byte that is not UTF-8 is read as U+FFFD, so that the file is claimed and
    its reader names the byte)."""
    if path.suffix.lower() != (".tsv" if delimiter == "\t" else ".csv"):
        return None
    try:
        text = read_bytes(path, "file", 65536).decode("utf-8-sig", errors="replace")
        return next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), None)
    except (DataError, csv.Error):
        return None


def _last_line(text: str) -> int:
    return text.rstrip("\r\n").count("\n") + 1
