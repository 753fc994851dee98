"""The Markdown tables of a docs page, read back as rows, and the numbers in their cells.

For pictures redrawn from a page's own table (`report.page_pictures`): the table is the
measurement; these read it as the page shows it.
"""

from __future__ import annotations

import re

from robustvlm.errors import DataError

_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_NUMBER = re.compile(r"[-+−]?\d+(?:\.\d+)?")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def markdown_tables(text: str) -> list[list[dict[str, str]]]:
    """Every table of `text` (a header line, a `|---|` line, then rows), in page order, each as
    its rows: {header cell: row cell}."""
    lines = text.splitlines()
    tables = []
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and _SEPARATOR.match(lines[i + 1]) and not (i and lines[i - 1].startswith("|")):
            header = _cells(lines[i])
            rows = []
            for line in lines[i + 2:]:
                if not line.startswith("|"):
                    break
                rows.append(dict(zip(header, _cells(line))))
            tables.append(rows)
    return tables


def tables_with(text: str, column: str, where: str) -> list[list[dict[str, str]]]:
    """The tables of `text` that have a column named `column`; DataError naming `where` when none has."""
    found = [table for table in markdown_tables(text) if table and column in table[0]]
    if not found:
        raise DataError(f"{where}: no table with a column {column!r}")
    return found


def numbers(cell: str, where: str) -> list[float]:
    """The numbers written in a table cell, in order ("50.5 ± 1.4" -> [50.5, 1.4]; "−0.1" is
    negative); DataError naming `where` when it holds none."""
    found = [float(n.replace("−", "-")) for n in _NUMBER.findall(cell.replace(",", ""))]
    if not found:
        raise DataError(f"{where}: no number in the cell {cell!r}")
    return found
