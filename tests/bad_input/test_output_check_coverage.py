"""Every command that writes goes through the one output check (issue 45): the commands are
enumerated from the CLI parser itself, so a command added later is covered without editing this
test. An argument is an output when its name says so (a word of its dest among OUTPUT_WORDS) or
its help does (it writes, saves or copies: `--questions`, "also write the per-question rows here");
each must carry an output check of `cli.options` as its argparse type, and running the command
with that argument under an existing file, in a folder of the user's files, at a symbolic link
(dangling, or to a folder of the user's files), at `/` or at `.` (the current folder, holding the
user's files) stops at parse time with one error line naming it, exit 2, and nothing written
(issues 45 and 52.3-5, 52.13). Kinds of bad input covered: one per writing command and output
argument (six ways each)."""

from __future__ import annotations

import argparse
import contextlib
import io
import re

import pytest
from bad_input import run_cli, snapshot

from robustvlm.cli import build_parser
from robustvlm.cli.output_checks import OUTPUT_CHECK

OUTPUT_WORDS = {"out", "output", "folder", "dir", "save", "dest", "write", "target", "to"}
#: Help that says an argument names where something is written (`--questions FILE`: "also write ... here").
WRITES = re.compile(r"^(also )?(write|save|copy)\b|\bto (write|copy into)\b", re.IGNORECASE)


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, (*path, name))


def _is_output(action: argparse.Action) -> bool:
    """A path-taking argument named or described as an output (a flag such as --save-model takes no path)."""
    named = bool(OUTPUT_WORDS & set(action.dest.lower().split("_")))
    return action.nargs != 0 and (named or bool(WRITES.search(action.help or "")))


OUTPUTS = [(" ".join(path), action.dest) for path, leaf in _leaves(build_parser())
           for action in leaf._actions if _is_output(action)]


def test_the_enumeration_finds_the_writing_commands():
    """A guard on the guard: the parser walk reaches every command group's writers."""
    commands = {command for command, _ in OUTPUTS}
    assert {"train", "eval", "compare", "zoo probe-context", "configs copy", "mc build", "data synth"} <= commands
    assert {("data fetch", "to"), ("robustness convert", "out"), ("robustness convert", "questions")} <= set(OUTPUTS)
    assert len(commands) >= 25


def _argv(command: str, dest: str, value: str) -> list[str]:
    """The command with every required argument filled with a placeholder and `dest` = `value`."""
    leaf = dict((" ".join(p), lf) for p, lf in _leaves(build_parser()))[command]
    argv = command.split()
    for action in leaf._actions:
        if action.dest == dest:
            argv += [value] if not action.option_strings else [action.option_strings[0], value]
        elif action.required and not isinstance(action, argparse._HelpAction):
            filler = str(next(iter(action.choices))) if action.choices else "1"
            argv += [filler] if not action.option_strings else [action.option_strings[0], filler]
    return argv


WHERE = ["under-a-file", "users-folder", "dangling-link", "link-to-users-folder", "root", "current-folder"]
REFUSALS = ("is a file", "did not write", "is a folder", "symbolic link", "file-system root", "current folder")


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(("command", "dest"), OUTPUTS, ids=[f"{c}:{d}" for c, d in OUTPUTS])
def test_every_output_argument_is_checked_before_any_work(command, dest, where, tmp_path, monkeypatch):
    leaf = dict((" ".join(p), lf) for p, lf in _leaves(build_parser()))[command]
    action = next(a for a in leaf._actions if a.dest == dest)
    assert getattr(action.type, OUTPUT_CHECK, False), f"{command}: {dest} is written without the output check"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("mine")
    users = tmp_path / "users"
    users.mkdir()
    (users / "mine.txt").write_text("mine")
    if where == "users-folder" and command == "configs copy":
        pytest.skip("configs copy adds one new file to a folder of the user's configs (never over a file)")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "link").symlink_to(users)
    value = {"under-a-file": str(tmp_path / "a_file" / "out"), "users-folder": str(users), "root": "/",
             "dangling-link": str(tmp_path / "dangling"), "link-to-users-folder": str(tmp_path / "link"),
             "current-folder": "."}[where]
    before = snapshot(tmp_path)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = run_cli(_argv(command, dest, value))
    lines = [line for line in err.getvalue().splitlines() if "error:" in line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err.getvalue(), err.getvalue()
    assert value in lines[0] and any(why in lines[0] for why in REFUSALS), lines[0]
    assert snapshot(tmp_path) == before
    assert {p.name for p in tmp_path.iterdir()} <= {"a_file", "users", "dangling", "link", "response_cache"}
    assert not (tmp_path / "nowhere").exists()
