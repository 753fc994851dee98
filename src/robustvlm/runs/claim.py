"""Claiming a run folder: its exclusive lock, the stored settings checked against the new ones
(`--resume`), and folders written under a temporary name."""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import BaseModel

from robustvlm.errors import ConfigError
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.redact import redact
from robustvlm.runs.folders import (
    CONFIG_FILE,
    LOCK_FILE,
    MARKER_FILE,
    check_output_folder,
    holds_finished_work,
    make_output_folder,
)
from robustvlm.runs.settings import (
    differing_keys,
    flatten_settings,
    resolved_settings,
    stored_command,
    write_settings,
)

_held_locks: dict[Path, IO[str]] = {}


def lock_run_folder(folder: Path) -> None:
    """Take the exclusive lock of `folder` for this process (see the module doc); ConfigError
    naming the holder when another process has it. Taking it again in the same process is a no-op."""
    key = folder.resolve()
    if key in _held_locks:
        return
    try:
        handle = (folder / LOCK_FILE).open("a+", encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot write in output folder {folder}: {err.strerror or err}") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise ConfigError(
            f"{folder} is being written by {holder}: two writers would corrupt it; wait for that "
            "run to end (or stop it), then run again"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"process {os.getpid()} ({redact(' '.join(sys.argv))})\n")
    handle.flush()
    _held_locks[key] = handle


def release_run_folders() -> None:
    """Release every run-folder lock this process holds (the CLI does at the end of a command)."""
    for handle in _held_locks.values():
        handle.close()
    _held_locks.clear()


def claim_run_folder(
    path: str | Path,
    settings: BaseModel | Mapping[str, Any],
    *,
    command: str,
    resume: bool,
    may_differ: Collection[str] = (),
    write: bool = True,
) -> Path:
    """Make `path` the folder of a run with `settings`, or raise ConfigError (see module doc).

    Args:
        path: the output folder (created).
        settings: the run's resolved settings (a pydantic config or a JSON-safe mapping).
        command: the robustvlm command whose run this is ("train", "eval", "rm bon", ...).
        resume: continue the run the folder holds.
        may_differ: dotted keys that may change between the stored and the new settings.
        write: write `config.resolved.yaml` (False on the non-main processes of a distributed
            run, which only check).

    Returns:
        the folder as a Path.
    """
    folder = Path(path)
    now = resolved_settings(settings)
    _check_claim(folder, now, command, resume, may_differ)
    if write:
        make_output_folder(folder)
        lock_run_folder(folder)
        if _check_claim(folder, now, command, resume, may_differ):  # again: a writer may have ended
            _remove_prepared(folder)
        write_settings(now, folder / CONFIG_FILE, command)
    return folder


def _remove_prepared(folder: Path) -> None:
    """Remove what an earlier attempt that finished nothing prepared from its (other) settings: a
    built-in benchmark (`data/`, when those settings named one) and a tiny base model (`base/`,
    when they named a `tiny:` model). Folders the stored settings do not account for are the
    user's and stay."""
    saved = flatten_settings(yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8")) or {})
    if saved.get("data.benchmark") is not None:
        shutil.rmtree(folder / "data", ignore_errors=True)
    if ModelRef.from_record(str(saved.get("model.name", ""))).kind == TINY:
        shutil.rmtree(folder / "base", ignore_errors=True)


def _check_claim(
    folder: Path, now: dict[str, Any], command: str, resume: bool, may_differ: Collection[str]
) -> bool:
    """Raise ConfigError if this run may not write `folder`; True when the folder holds stored
    settings of another run that finished no work (free again, its settings replaced)."""
    check_output_folder(folder)
    stored_path = folder / CONFIG_FILE
    if stored_path.is_file():
        saved = yaml.safe_load(stored_path.read_text(encoding="utf-8")) or {}
        keys = differing_keys(saved, now, may_differ)
        if not holds_finished_work(folder):
            return bool(keys)
        other = stored_command(stored_path)
        run = f"a `robustvlm {other}` run" if other else "a run"
        if other not in (None, command):
            raise ConfigError(
                f"{folder} holds {run} ({CONFIG_FILE}), not a `robustvlm {command}` run: choose "
                "another --out"
            )
        if not resume:
            raise ConfigError(
                f"{folder} already holds {run} ({CONFIG_FILE}): pass --resume to continue it, or "
                "choose another --out"
            )
        if keys:
            before, after = flatten_settings(saved), flatten_settings(now)
            raise ConfigError(
                f"cannot resume into {folder}: its {CONFIG_FILE} differs in {keys} (saved "
                f"{[before.get(k) for k in keys]}, now {[after.get(k) for k in keys]}); use the "
                "same settings, or a new --out"
            )
    elif resume and folder.is_dir() and any(p.name not in (LOCK_FILE, MARKER_FILE) for p in folder.iterdir()):
        raise ConfigError(
            f"cannot resume into {folder}: it holds files but no {CONFIG_FILE}, so the settings "
            "they were made with are unknown; use another --out"
        )
    return False


@contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """Write a folder under a temporary name (the yielded path) and rename it to `path` once the
    block ends without error, so a kill mid-write never leaves a half folder under its name (a
    half `final/` would load). An earlier folder at `path` is replaced."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    yield tmp
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
