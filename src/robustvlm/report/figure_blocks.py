"""The figure blocks of a Markdown document: the table between `<!-- figure:NAME -->` and
`<!-- /figure:NAME -->`, its stamp line and machine line (`report.figure_stamps`), read and
rewritten in place (`figures.write` fills them from results; `report.support_table` too)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from robustvlm.errors import ConfigError
from robustvlm.report.figure_stamps import Stamp, parse_machine, parse_stamp


def _block(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- figure:{re.escape(name)} -->\n)(.*?)(<!-- /figure:{re.escape(name)} -->)", re.S)


def _content(text: str, name: str) -> tuple[str, Stamp | None]:
    """The table of figure `name` in `text` and its stamp line, if any (ConfigError when absent)."""
    match = _block(name).search(text)
    if match is None:
        raise ConfigError(f"no <!-- figure:{name} --> block")
    lines = match.group(2).strip().splitlines()
    machine = parse_machine(lines[-1]) if lines else None
    if machine is not None:
        lines = lines[:-1]
    stamp = parse_stamp(lines[-1]) if lines else None
    table = lines[:-1] if stamp else lines
    if stamp is not None and machine:
        stamp = dataclasses.replace(stamp, machine=machine)
    return "\n".join(table).strip(), stamp


def read_figure(text: str, name: str) -> str:
    """The table between the markers of figure `name` in `text`, without its stamp line
    (ConfigError when absent)."""
    return _content(text, name)[0]


def read_stamp(text: str, name: str) -> Stamp | None:
    """The stamp line of figure `name` in `text` (`report.figure_stamps`), None when it has none."""
    return _content(text, name)[1]


def update(doc: str | Path, name: str, table: str, stamp: Stamp | None = None) -> None:
    """Replace the content between the markers of figure `name` in `doc` with `table` and, when
    given, the stamp's lines under it (`Stamp.lines`)."""
    path = Path(doc)
    text = path.read_text(encoding="utf-8")
    read_figure(text, name)
    content = "\n\n".join(part for part in (table.strip(), stamp.lines() if stamp else "") if part)
    path.write_text(_block(name).sub(lambda m: m.group(1) + content + "\n" + m.group(3), text), encoding="utf-8")
