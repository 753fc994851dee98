"""The command line explains itself (issue 44.3): every option of every leaf command has a help
line, every leaf command and every group shows an example (run by tests/test_documented_commands.py), one name per
idea (former spellings accepted with one warning line), `--version`, useful messages for a
command given nothing, and small cli modules. Leaf commands are read from the parser
(tests/helpers/cli_tree.py), so a new command is checked without being listed here."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest
from cli_tree import all_commands, examples, leaf_commands, subcommands

from robustvlm.cli import build_parser, main, parse_command_line

ROOT = Path(__file__).resolve().parents[1]
LEAVES = leaf_commands()
MAX_CLI_MODULE_LINES = 250

#: {(command, former spelling): current spelling}: the renames of issue 44.3, accepted until the
#: release after the one that renamed them.
RENAMED = {
    ("icl eval", "--n-per-domain"): "--n-per-env",
    ("diagnose", "--n-per-domain"): "--n-per-env",
    ("mc eval", "--bench"): "--benchmark",
    ("embed eval", "--bench"): "--benchmark",
    ("rm sample", "--server"): "--base-url",
}


def test_the_tree_has_the_commands_it_had():
    assert len(LEAVES) >= 32 and {"data synth", "rm data check", "zoo list", "configs copy"} <= set(LEAVES)


@pytest.mark.parametrize("command", sorted(LEAVES))
def test_every_option_and_argument_has_help(command):
    missing = [a.option_strings[0] if a.option_strings else a.dest for a in LEAVES[command]._actions
               if not a.help and not isinstance(a, argparse._HelpAction)]
    assert not missing, f"robustvlm {command}: give these a help text: {missing}"


@pytest.mark.parametrize("command", sorted(LEAVES))
def test_every_leaf_command_shows_an_example_of_itself(command):
    """The example ends with the command itself; lines before it prepare what it needs from a
    fresh clone (issue 56.6: `demo reward --zoo --quick` needs `zoo build --quick` first)."""
    lines = examples(LEAVES[command])
    assert lines, f"robustvlm {command} has no example in its help (cli.options.example)"
    assert lines[-1].startswith(f"robustvlm {command}"), lines
    for line in lines:
        parse_command_line(build_parser(), shlex.split(line)[1:])  # SystemExit(2) if argparse refuses it


@pytest.mark.parametrize("group", sorted(name for name, parser in all_commands().items() if subcommands(parser)))
def test_every_group_shows_an_example_of_its_commands(group):
    """Issue 56.6: `robustvlm --help`, `robustvlm data --help`, ... showed no example."""
    lines = examples(all_commands()[group])
    assert lines and any(line.startswith(f"robustvlm {group}".rstrip()) for line in lines), lines
    for line in lines:
        parse_command_line(build_parser(), shlex.split(line)[1:])


def test_the_example_is_printed_as_written(capsys):
    with pytest.raises(SystemExit):
        main(["mc", "eval", "--help"])
    out = capsys.readouterr().out
    assert out.rstrip().endswith("example:\n  " + examples(LEAVES["mc eval"])[0])


def test_cli_modules_stay_small():
    long = {p.name: n for p in sorted((ROOT / "src" / "robustvlm" / "cli").glob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_CLI_MODULE_LINES}
    assert not long, f"cli modules over {MAX_CLI_MODULE_LINES} lines (split them by command): {long}"


def test_version_is_the_packages(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M).group(1)
    assert capsys.readouterr().out.strip() == f"robustvlm {version}"


@pytest.mark.parametrize("command", ["train", "rm train", "embed train"])
def test_a_train_command_given_nothing_says_what_to_give(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main(command.split())
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"robustvlm {command}: error: no config given" in err
    assert "robustvlm configs list" in err and f"for example: robustvlm {command} " in err
    assert "required: config" not in err


@pytest.mark.parametrize("group", ["zoo", "data", "rm", "rm data", "configs"])
def test_a_command_group_given_nothing_lists_its_commands_not_an_internal_name(group, capsys):
    with pytest.raises(SystemExit) as stop:
        main(group.split())
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "_command" not in err
    names = [c.split()[-1] for c in LEAVES if c.startswith(group + " ") and len(c.split()) == len(group.split()) + 1]
    assert re.search(r"required: \{.*\}", err) and all(name in err for name in names), err


@pytest.mark.parametrize(("command", "old"), sorted(RENAMED))
def test_a_former_spelling_is_read_as_the_current_one_with_one_warning(command, old, capsys):
    new = RENAMED[(command, old)]
    parser = LEAVES[command]
    offered = " ".join(parser.format_help().split()).replace(f"formerly {old}", "")
    assert not re.search(rf"{re.escape(old)}(?![\w-])", offered)  # only the current spelling is offered
    action = next(a for a in parser._actions if new in a.option_strings)
    value = "http://localhost:1/v1" if new == "--base-url" else "7"
    for words in ([old, value], [f"{old}={value}"]):
        args = build_parser().parse_args([*command.split(), *words, *_required_besides(parser, action)])
        assert getattr(args, action.dest) in (value, 7, [value])
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"warning: {old} is deprecated") and new in err
    build_parser().parse_args([*command.split(), new, value, *_required_besides(parser, action)])
    assert capsys.readouterr().err == ""


def _required_besides(parser: argparse.ArgumentParser, skip: argparse.Action) -> list[str]:
    """Placeholder values for a command's other required options."""
    return [word for a in parser._actions if a.required and a is not skip and a.option_strings
            for word in (a.option_strings[0], "x")]
