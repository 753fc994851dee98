"""Which output folders and files a command may write: robustvlm's markers, the path checks, and
output files written beside their name and renamed into place."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import IO

from robustvlm.errors import ConfigError

CONFIG_FILE = "config.resolved.yaml"
LOCK_FILE = "run.lock"
MARKER_FILE = ".robustvlm"  # a folder written by a command that keeps no settings file (see `mark_output_folder`)
OWNED_FILE = ".robustvlm-files"  # the output files robustvlm wrote into a folder, one name a line
MARKERS = frozenset({CONFIG_FILE, LOCK_FILE, MARKER_FILE})
PREPARED = ("data", "base")
NAME_MAX, PATH_MAX = 255, 4096  # bytes: Linux's limits on one name and on a whole path  # inputs a run rebuilds from its settings: benchmark, tiny base model


def holds_finished_work(folder: Path) -> bool:
    """Whether `folder` holds anything a run produced (see the module doc for what does not count)."""
    for entry in folder.iterdir():
        if entry.name in (*MARKERS, *PREPARED):
            continue
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        if any(p.stat().st_size > 0 for p in files):
            return True
    return False


def check_output_path(path: Path) -> None:
    """ConfigError unless a command could create `path`: UTF-8 text, every name at most 255 bytes
    and the whole at most 4,096, and the nearest existing place above it a folder this process
    may write in (not a file, not on a read-only file system)."""
    text = str(path)
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise ConfigError(f"output path {shown}: not valid UTF-8 text; choose a name of readable characters") from None
    if len(encoded) > PATH_MAX or any(len(part.encode("utf-8")) > NAME_MAX for part in path.parts):
        raise ConfigError(f"output path {text[:40]}...{text[-40:]}: too long (at most {NAME_MAX} bytes per name and "
                          f"{PATH_MAX} in all); choose a shorter --out")
    above = next((p for p in (path.absolute(), *path.absolute().parents) if p.exists() or p.is_symlink()), None)
    if above is not None and above != path.absolute() and not above.is_dir():
        raise ConfigError(f"output path {path}: cannot create it, {above} is a file")
    if above is not None and above.is_dir() and not os.access(above, os.W_OK):
        raise ConfigError(f"output path {path}: {above} is not writable (a read-only folder or file system)")


def _refuse_link(path: Path, what: str) -> None:
    """ConfigError when `path` itself is a symbolic link (dangling or not): a write would go
    wherever it points."""
    if path.is_symlink():
        raise ConfigError(f"{what} {path} is a symbolic link: writing would change what it points to (or create "
                          "it there); remove the link or choose another place")


def is_robustvlm_folder(folder: Path) -> bool:
    """Whether `folder` carries robustvlm's marker: a run's settings or lock, or the marker file
    of a command that keeps no settings (`mark_output_folder`). A file name a command writes
    (results.json, manifest.json) proves nothing: the user's folder may hold one."""
    return folder.is_dir() and any((folder / name).is_file() for name in MARKERS)


def check_output_folder(folder: Path) -> None:
    """ConfigError unless `folder` may be an output folder: a usable path (`check_output_path`),
    no symbolic link (dangling or not), not the file-system root, the home folder or the current
    folder, not a file, and missing, empty, or carrying robustvlm's marker
    (`is_robustvlm_folder`), or holding only folders that each carry it (a command that claims a
    subfolder, e.g. `embed eval`'s retrieval/), so that no file robustvlm did not write is ever
    replaced."""
    check_output_path(folder)
    _refuse_link(folder, "output folder")
    try:
        place = folder.expanduser().resolve()
    except (OSError, RuntimeError, ValueError) as err:
        raise ConfigError(f"output folder {folder}: not a usable path ({err})") from None
    if place == Path(place.anchor) or place == Path.home().resolve():
        where = "the file-system root" if place == Path(place.anchor) else "the home folder"
        raise ConfigError(f"output folder {folder} is {where}: choose a new folder for the run's files")
    if place.exists() and not place.is_dir():
        raise ConfigError(f"output folder {folder} exists and is not a folder: choose a new --out")
    if is_robustvlm_folder(place):
        return
    here = place == Path.cwd().resolve()
    entries = sorted(p.name for p in place.iterdir()) if place.is_dir() else []
    runs_only = all(is_robustvlm_folder(place / name) for name in entries)
    if entries and not runs_only:
        raise ConfigError(
            f"output folder {folder}{' (the current folder)' if here else ''} holds files robustvlm did not write "
            f"({', '.join(entries[:3])}{', ...' if len(entries) > 3 else ''}) and no run of its own: a run would "
            "mix its files with them and could replace them; choose a new or empty --out"
        )
    if here:
        raise ConfigError(f"output folder {folder} is the current folder, which holds no robustvlm run: the run's "
                          "files would land among yours; choose a new folder for them")


def mark_output_folder(folder: Path, command: str) -> Path:
    """`check_output_folder`, then create `folder` and write robustvlm's marker in it (naming
    `command`), before any other file: a killed run's folder is then still robustvlm's, and its
    re-run may resume into it. Returns the folder."""
    make_output_folder(folder)
    marker = folder / MARKER_FILE
    if not marker.is_file():
        marker.write_text(f"# robustvlm {command} run: this folder's files were written by robustvlm\n",
                          encoding="utf-8")
    return folder


def unmark_unused_folder(folder: Path) -> None:
    """Remove `folder` when it holds nothing but robustvlm's marker (`mark_output_folder`): a run
    refused before any work leaves no folder behind; one that wrote anything keeps it."""
    if folder.is_dir() and all(p.name == MARKER_FILE for p in folder.iterdir()):
        shutil.rmtree(folder, ignore_errors=True)


def owns_file(path: Path) -> bool:
    """Whether `path` is an output file robustvlm wrote (named in its folder's OWNED_FILE)."""
    listing = path.parent / OWNED_FILE
    return listing.is_file() and path.name in listing.read_text(encoding="utf-8").splitlines()


def check_output_file(path: Path) -> None:
    """ConfigError unless a command may write the file `path`: a usable path, not a symbolic
    link (dangling or not), not a folder, not `/` or `.`, and new or a file robustvlm wrote
    there itself (`owns_file`), never a file of the user's."""
    check_output_path(path)
    _refuse_link(path, "output file")
    if path.is_dir():
        raise ConfigError(f"output file {path} is a folder: give a file name")
    if path.exists() and not owns_file(path):
        raise ConfigError(f"output file {path} exists and was not written by robustvlm: choose a new file name")


def write_output_file(path: Path, write: Callable[[IO[str]], object]) -> None:
    """Write the output file `path` (checked by `check_output_file`) through `write(handle)`:
    into a partial file beside it, renamed into place once complete, and recorded as robustvlm's
    (OWNED_FILE) so a re-run may replace it. A failed write (a full disk) leaves neither a
    partial file nor a truncated `path`."""
    check_output_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create the folder of output file {path}: {err.strerror or err}") from None
    part = path.with_name(f".{path.name}.part")
    try:
        with part.open("w", encoding="utf-8", newline="") as handle:
            write(handle)
        _record_owned(path)
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)


def _record_owned(path: Path) -> None:
    listing = path.parent / OWNED_FILE
    names = listing.read_text(encoding="utf-8").splitlines() if listing.is_file() else []
    if path.name not in names:
        with listing.open("a", encoding="utf-8") as handle:
            handle.write(path.name + "\n")


def make_output_folder(folder: Path) -> None:
    """`check_output_folder`, then create the folder (ConfigError naming it when it cannot be)."""
    check_output_folder(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create output folder {folder}: {err.strerror or err}") from None


def prepare_output_file(path: Path, *, overwrite: bool) -> None:
    """Make sure a command may write the file `path` (a questions file, ...): not a folder, new
    unless `overwrite` (never replaced by accident), its folder created; ConfigError naming it
    otherwise."""
    check_output_file(path)
    if path.exists() and not overwrite:
        raise ConfigError(f"output file {path} already exists: pass --overwrite to replace it, or choose another --out")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create the folder of output file {path}: {err.strerror or err}") from None
