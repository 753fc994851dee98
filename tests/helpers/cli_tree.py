"""The leaf commands of the `robustvlm` parser (`data synth`, `train`, `rm data check`, ...), read
from the parser itself so that a new command is covered by the tests that walk them."""

from __future__ import annotations

import argparse


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name, in the order its help lists them ({} for a leaf)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def leaf_commands(parser: argparse.ArgumentParser | None = None, path: str = "") -> dict[str, argparse.ArgumentParser]:
    """{"data synth": its parser, ...}: every command that takes no subcommand, below `parser`
    (default: `robustvlm`'s own)."""
    if parser is None:
        from robustvlm.cli import build_parser

        parser = build_parser()
    children = subcommands(parser)
    if not children:
        return {path: parser}
    leaves: dict[str, argparse.ArgumentParser] = {}
    for name, child in children.items():
        leaves.update(leaf_commands(child, f"{path} {name}".strip()))
    return leaves


def all_commands(parser: argparse.ArgumentParser | None = None, path: str = "") -> dict[str, argparse.ArgumentParser]:
    """{"": `robustvlm`'s parser, "data": its group's, "data synth": ...}: every command, groups
    (whose help is what `robustvlm data --help` prints) as well as leaves."""
    if parser is None:
        from robustvlm.cli import build_parser

        parser = build_parser()
    found = {path: parser}
    for name, child in subcommands(parser).items():
        found.update(all_commands(child, f"{path} {name}".strip()))
    return found


def examples(parser: argparse.ArgumentParser) -> list[str]:
    """The command lines of a parser's help epilog (`cli.options.example`)."""
    return [line.strip() for line in (parser.epilog or "").splitlines() if line.strip().startswith("robustvlm ")]
