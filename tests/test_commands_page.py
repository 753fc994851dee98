"""The commands reference (docs/reference/commands.md) says what the CLI takes (issue 50.2): each
synopsis in its table names only options its command accepts, and `key=value` overrides only for
a command that takes them (a demo takes none)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cli_tree import subcommands

from robustvlm.cli import build_parser

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "commands.md"
SYNOPSIS = re.compile(r"^\| `(robustvlm [^`]*)`", re.M)


def synopsis_problems(synopsis: str, root: argparse.ArgumentParser) -> list[str]:
    """What `synopsis` ("robustvlm demo ladder [--quick] [--out DIR]") claims that its command
    does not take: options it lacks, and `key=value` where it takes no overrides."""
    words, parser, command = synopsis.replace("\\|", "|").split()[1:], root, ["robustvlm"]
    while words and words[0] in subcommands(parser):
        parser = subcommands(parser)[words[0]]
        command.append(words.pop(0))
    taken = {option for action in parser._actions for option in action.option_strings}
    problems = [f"{' '.join(command)}: no option {option}"
                for option in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", synopsis)) - taken)]
    overrides = any(action.dest == "overrides" for action in parser._actions)
    if "key=value" in synopsis and not overrides:
        problems.append(f"{' '.join(command)}: takes no key=value overrides")
    return problems


def test_the_check_catches_what_the_cli_refuses():
    root = build_parser()
    assert synopsis_problems("robustvlm demo [--quick] [key=value ...]", root) == [
        "robustvlm demo: takes no key=value overrides"]
    assert synopsis_problems("robustvlm demo ladder [--quick] [--speed N]", root) == [
        "robustvlm demo ladder: no option --speed"]
    assert synopsis_problems("robustvlm train CONFIG.yaml [--out DIR] [--resume] [key=value ...]", root) == []


def test_every_synopsis_of_the_commands_page_is_what_the_cli_takes():
    root = build_parser()
    synopses = SYNOPSIS.findall(PAGE.read_text(encoding="utf-8"))
    assert len(synopses) > 20
    problems = [problem for synopsis in synopses for problem in synopsis_problems(synopsis, root)]
    assert not problems, f"docs/reference/commands.md documents what the CLI refuses: {problems}"
