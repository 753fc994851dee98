"""The output checks of the command line: each command's output path is checked as an argparse
type, so a bad `--out` (a folder of the user's files, an existing file, a path that cannot be
written) is refused while parsing, before any work, as a usage error naming it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

OUTPUT_CHECK = "output_check"  # the attribute that marks an argparse type as an output check


def output_check(check: Callable[[Path], None]) -> Callable[[str], str]:
    """An argparse type that runs a `runs` output check on the path given (so a bad --out is
    refused before any work, as a usage error naming it) and returns the text unchanged."""

    def parse(text: str) -> str:
        from robustvlm.errors import ConfigError

        try:
            check(Path(text))
        except ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return text

    setattr(parse, OUTPUT_CHECK, True)
    return parse


def _folder_to_copy_into(folder: Path) -> None:
    """`configs copy`'s folder: it may hold the user's other files (each copy is a new file, never
    over one), so only the path is checked: usable, no symbolic link, not the file-system root,
    the home folder or the current folder, and no file."""
    from robustvlm.errors import ConfigError
    from robustvlm.runs import check_output_path

    check_output_path(folder)
    if folder.is_symlink():
        raise ConfigError(f"{folder} is a symbolic link: a copy would be written where it points; copy into "
                          "another folder or remove the link first")
    place = folder.expanduser().resolve()
    special = {Path(place.anchor): "the file-system root", Path.home().resolve(): "the home folder",
               Path.cwd().resolve(): "the current folder"}
    if place in special:
        raise ConfigError(f"{folder} is {special[place]}: copy into a folder of its own (e.g. my_configs)")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} exists and is not a folder: copy into a folder")


def _output_folder(folder: Path) -> None:
    from robustvlm.runs import check_output_folder

    check_output_folder(folder)


def _output_file(path: Path) -> None:
    from robustvlm.runs import check_output_file

    check_output_file(path)


output_folder = output_check(_output_folder)
output_file = output_check(_output_file)
folder_to_copy_into = output_check(_folder_to_copy_into)


def check_outputs_first(parser: argparse.ArgumentParser) -> None:
    """Give every `--out` and `--to` of every subcommand below `parser` the output-folder check as
    its type, unless the command chose another output check (`output_file`, ...)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                check_outputs_first(child)
        elif action.dest in ("out", "to") and not getattr(action.type, OUTPUT_CHECK, False):
            action.type = output_folder
