"""Every command's help text, compared with a stored snapshot (tests/cli_help.txt).

`robustvlm --help` and the help of every subcommand and sub-subcommand are rendered at a fixed
terminal width (100 columns) and compared, command by command, with the snapshot, so a change of
layout in the command line (e.g. splitting it into modules) cannot change what a user reads.

A new command has no snapshot yet and fails here. To record it, run

    ROBUSTVLM_HELP_SNAPSHOT=add python -m pytest tests/test_cli_help.py

which adds the help of commands missing from the snapshot and still compares every other one.
`ROBUSTVLM_HELP_SNAPSHOT=rewrite` rewrites the whole snapshot: only for an intended change of an
existing command's help, and review the diff of tests/cli_help.txt.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

SNAPSHOT = Path(__file__).with_name("cli_help.txt")
WIDTH = 100
HEADER = re.compile(r"^=== (.+) ===$", re.MULTILINE)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name, in the order the help lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def rendered_help() -> dict[str, str]:
    """{"robustvlm data check": its help, ...} for the top command and every subcommand below it;
    call with COLUMNS set (argparse reads the width when a help text is formatted)."""
    from robustvlm.cli import build_parser

    found: dict[str, str] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found[name] = parser.format_help()
        for sub_name, sub in _subcommands(parser).items():
            walk(f"{name} {sub_name}", sub)

    walk("robustvlm", build_parser())
    return found


def read_snapshot(path: Path = SNAPSHOT) -> dict[str, str]:
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    heads = list(HEADER.finditer(text))
    return {m.group(1): text[m.end() + 1: heads[i + 1].start() if i + 1 < len(heads) else len(text)]
            for i, m in enumerate(heads)}


def write_snapshot(helps: dict[str, str], path: Path = SNAPSHOT) -> None:
    path.write_text("".join(f"=== {name} ===\n{text}" for name, text in helps.items()), encoding="utf-8")


def test_snapshot_round_trips(tmp_path):
    helps = {"robustvlm": "usage: robustvlm\n\nline\n", "robustvlm data": "usage: robustvlm data\n"}
    write_snapshot(helps, tmp_path / "h.txt")
    assert read_snapshot(tmp_path / "h.txt") == helps


def test_every_help_text_matches_the_snapshot(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("NO_COLOR", "1")
    helps = rendered_help()
    stored = read_snapshot()
    mode = os.environ.get("ROBUSTVLM_HELP_SNAPSHOT", "")
    if mode == "rewrite":
        write_snapshot(helps)
        stored = helps
    elif mode == "add" and set(helps) - set(stored):
        write_snapshot({**stored, **{k: v for k, v in helps.items() if k not in stored}})
        stored = read_snapshot()
    missing = sorted(set(helps) - set(stored))
    assert not missing, (f"no stored help for {missing}: record it with "
                         f"ROBUSTVLM_HELP_SNAPSHOT=add python -m pytest {Path(__file__).name}")
    assert sorted(set(stored) - set(helps)) == [], "commands in the snapshot that no longer exist"
    for name, text in helps.items():
        assert text == stored[name], f"the help of `{name}` changed"


@pytest.mark.parametrize("command", ["robustvlm", "robustvlm rm data check"])
def test_the_snapshot_holds_top_and_nested_commands(command):
    assert command in read_snapshot()
