"""Run folders: how every command claims its output folder, and the JSONL rows it appends there.

A run folder holds `config.resolved.yaml`, every setting of the run with defaults filled in
(as `robustvlm.redact` lets them be written), under a first line naming the command that wrote
it (`# robustvlm eval run`). `claim_run_folder` refuses an output folder that cannot hold a run
(`check_output_folder`: the file-system root, the home folder, a file, a folder that cannot be
created, a non-empty folder holding no robustvlm run, which would mix the user's files with the
run's and could replace them; a symbolic link, dangling or not; the current folder) and gives
`--resume` one meaning in every command. A folder is robustvlm's only when its marker says so: a
run's `config.resolved.yaml` or `run.lock`, or `.robustvlm`, which a command that keeps no settings
(a demo, `data synth`, `data fetch --to`) writes before any other file (`mark_output_folder`);
never because it holds a file named like one a command writes. An output file (`convert --out`,
`mc build --out`) is written beside its name and renamed into place (`write_output_file`), and
recorded in its folder's `.robustvlm-files`, so a re-run may replace it but never a user's file.

`--resume`:

- without resume, a folder that already holds a run (its `config.resolved.yaml`) is refused,
  so finished work is never overwritten by accident;
- with resume, the stored settings must equal the new ones (keys allowed to differ, such as a
  batch size that changes no result, are named by the command); the error names every key that
  differs; a folder holding another command's run is refused naming that command.
  Paths compare resolved: `runs/x` and `/abs/runs/x` are one setting when they name one file;
- a folder whose run finished no work (nothing in it but its settings, its lock, empty files and
  the inputs a run prepares from its settings, `data/` and `base/`) is free again: a run that
  failed validation or setup never blocks the corrected command, with or without `--resume`.

Whoever writes a run folder holds an exclusive OS lock on its `run.lock` (`fcntl.flock`, taken
before the settings are written and held until `release_run_folders()` or the process ends, so a
killed writer frees it). A second writer stops at once with a ConfigError naming the process that
holds it. Only the main process of a distributed run writes (and locks); the others only check.
Every command that writes a run folder claims it here: train / embed train / rm train (the
training loop), eval, mc eval, icl eval, diagnose, embed eval, rm eval / score / sample / bon,
rm matrix, robustness fit / task-signal, study and sweep (their top folders and each run's).

Per-row outputs (predictions, per-question scores, training logs) are JSONL files written one
row at a time as work finishes. `read_jsonl` reads them back to resume: a torn last line (a
killed run: no newline, not valid JSON) is dropped and the file rewritten without it, while any
other unreadable line is damage and raises a DataError naming the file and line. Files a user
gives as input (candidates, scores, predictions) are read with `read_input_jsonl`, which never
writes: a torn line there is an error.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import BaseModel

from robustvlm.errors import ConfigError, DataError
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.redact import redact, redact_settings

CONFIG_FILE = "config.resolved.yaml"
LOCK_FILE = "run.lock"
MARKER_FILE = ".robustvlm"  # a folder written by a command that keeps no settings file (see `mark_output_folder`)
OWNED_FILE = ".robustvlm-files"  # the output files robustvlm wrote into a folder, one name a line
MARKERS = frozenset({CONFIG_FILE, LOCK_FILE, MARKER_FILE})
PREPARED = ("data", "base")
NAME_MAX, PATH_MAX = 255, 4096  # bytes: Linux's limits on one name and on a whole path  # inputs a run rebuilds from its settings: benchmark, tiny base model

_held_locks: dict[Path, IO[str]] = {}


def resolved_settings(settings: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe dict of a pydantic config (every default filled in) or of a plain mapping,
    redacted (`redact.redact_settings`): what may be written or sent to a tracker."""
    if isinstance(settings, BaseModel):
        return redact_settings(settings.model_dump(mode="json"))
    return redact_settings(json.loads(json.dumps(dict(settings))))


def write_settings(
    settings: BaseModel | Mapping[str, Any], path: str | Path, command: str | None = None
) -> None:
    """Write resolved settings as YAML (keys in definition order); `command`, the robustvlm
    command whose run folder this is, goes in a first comment line (see `stored_command`)."""
    header = f"# robustvlm {command} run: every setting, defaults filled in\n" if command else ""
    Path(path).write_text(
        header + yaml.safe_dump(resolved_settings(settings), sort_keys=False), encoding="utf-8"
    )


def stored_command(path: Path) -> str | None:
    """The command named in the first line of a `config.resolved.yaml` (None when absent)."""
    with path.open(encoding="utf-8") as handle:
        found = re.match(r"# robustvlm (.+?) run\b", handle.readline())
    return found[1] if found else None


def flatten_settings(value: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted key: leaf value} of nested mappings (lists are leaves)."""
    if not isinstance(value, Mapping) or not value:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, child in value.items():
        out.update(flatten_settings(child, f"{prefix}.{key}" if prefix else str(key)))
    return out


def differing_keys(
    saved: Mapping[str, Any], now: Mapping[str, Any], may_differ: Collection[str] = ()
) -> list[str]:
    """Sorted dotted keys whose values differ; a key under one of `may_differ` is not compared."""
    a, b = flatten_settings(dict(saved)), flatten_settings(dict(now))
    allowed = tuple(may_differ)
    return sorted(
        key
        for key in set(a) | set(b)
        if not _same_setting(a.get(key), b.get(key))
        and not any(key == p or key.startswith(p + ".") for p in allowed)
    )


def _same_setting(saved: Any, now: Any) -> bool:
    """Equal values, or two spellings (relative / absolute) of one existing path."""
    if saved == now:
        return True
    if not (isinstance(saved, str) and isinstance(now, str)) or "\n" in saved + now:
        return False
    try:
        a, b = Path(saved).expanduser(), Path(now).expanduser()
        return (a.exists() or b.exists()) and a.resolve() == b.resolve()
    except (OSError, ValueError):
        return False


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
    if ModelRef.parse(str(saved.get("model.name", ""))).kind == TINY:
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


# ---------------------------------------------------------------- JSONL rows


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file a run appends to ([] when there is none yet); see the module doc."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    complete, last = lines[:-1], lines[-1]  # `last` is b"" when the file ends with a newline
    rows = []
    for number, line in enumerate(complete, start=1):
        if line.strip():
            try:
                rows.append(json.loads(line.decode("utf-8")))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise DataError(f"line {number} is not valid JSON ({exc})", str(path), number) from exc
    if last.strip():
        try:
            rows.append(json.loads(last.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass  # torn by an interrupted write, possibly inside a multi-byte character
        write_jsonl(path, rows)
    return rows


def read_input_jsonl(path: str | Path, what: str = "JSONL file") -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of every row of a JSONL file the user gives as input.

    Inputs are read-only: unlike `read_jsonl`, nothing is ever repaired. A missing file, a line
    that is not a JSON object, or a torn last line is a DataError naming the file and line;
    blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} not found" if not path.exists() else f"{what} is not a file", str(path))
    rows = []
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"not valid JSON ({exc}); a cut last line means the file is incomplete",
                            str(path), number) from exc
        if not isinstance(row, dict):
            raise DataError("not a JSON object", str(path), number)
        rows.append((number, row))
    return rows


def append_jsonl(handle: IO[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Append rows to an open JSONL file and flush, so a kill loses at most the row in flight."""
    for row in rows:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    handle.flush()


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace a JSONL file atomically (written to a temporary name, then renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    tmp.replace(path)


USAGE_FILE = "usage.json"


def usage_recorder(folder: str | Path) -> Callable[[Mapping[str, int]], None]:
    """A sink for a served model's live counts of this run (requests sent, cache hits, tokens):
    each call rewrites the folder's usage.json, atomically, as the sum of the earlier runs into
    the folder and these counts, so a killed or refused run leaves what it sent."""
    path = Path(folder) / USAGE_FILE
    earlier = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def record(counts: Mapping[str, int]) -> None:
        total = dict(earlier)
        for key, value in counts.items():
            total[key] = total.get(key, 0) + value
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(total, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(path)

    return record
