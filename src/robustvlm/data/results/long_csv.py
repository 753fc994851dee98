"""robustvlm's own results CSV (what `mc eval` writes): one row per (model, benchmark) with the
columns `model, family, bench, accuracy, n` (accuracy a fraction, n the number of questions);
other columns are kept on the rows (for `--group-by`)."""

from __future__ import annotations

from pathlib import Path

from robustvlm.data.results.table import ReadOptions, ResultTable, count, fraction
from robustvlm.data.results.text import csv_header, csv_records
from robustvlm.errors import DataError

REQUIRED_COLUMNS = ("model", "family", "bench", "accuracy", "n")


def looks_like(path: Path) -> bool:
    """A .csv whose header has every REQUIRED_COLUMNS."""
    return set(REQUIRED_COLUMNS) <= set(csv_header(path) or [])


def read(path: Path, options: ReadOptions | None = None) -> ResultTable:
    """Rows of a results CSV; `line` is the 1-based line where the row ends (the header is line 1)."""
    header, records = csv_records(path, "results CSV")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise DataError(f"missing column(s) {', '.join(missing)}; need {REQUIRED_COLUMNS}", str(path), 1)
    rows = [_parse_row(raw, str(path), line) for line, raw in records]
    if not rows:
        raise DataError("the results CSV has no rows", str(path))
    return ResultTable(accuracies=rows)


def _parse_row(raw: dict, source: str, line: int) -> dict:
    values = {c: (raw.get(c) or "").strip() for c in REQUIRED_COLUMNS}
    empty = [c for c, v in values.items() if not v]
    if empty:
        raise DataError(f"empty value(s) in column(s) {', '.join(empty)}", source, line)
    extra = {k: (v or "").strip() for k, v in raw.items() if k and k not in REQUIRED_COLUMNS}
    return {**extra, **values, "accuracy": fraction(values["accuracy"], "accuracy", source, line),
            "n": count(values["n"], "n (number of questions)", source, line), "n_from": "file", "line": line}
