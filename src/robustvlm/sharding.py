"""Data-parallel scoring: which questions this process scores, where its rows go, how they merge.

The scoring commands of a local model (`eval`, `mc eval`, `icl eval`, `diagnose`'s in-context
stage, `rm eval`, `embed eval`'s benchmarks) write one JSONL row per question through
`score_rows`, and claim their run folder through `claim`. Two ways of splitting the questions, which combine:

- `--shard I/N` (`begin_command`): the run folder holds shard I of N, the I-th of N contiguous
  blocks of the questions in their order (`block`: sizes differ by at most one, the first blocks
  larger, as Accelerate's `split_between_processes` cuts). Its `config.resolved.yaml` adds
  `shard: I/N` and `shard.json` records what `robustvlm merge` needs to join the N folders: the
  command line, the hash of the settings without the shard, and per per-question file the number
  of questions and a hash of their keys (`workflows.merge`).
- a process group (`accelerate launch`, `torchrun`: WORLD_SIZE > 1): every process claims the same
  run folder (the main process writes its settings and holds its lock, the others only check),
  then scores its block of the questions still to score (`PartialState.split_between_processes`)
  into its own part file beside the per-question file, `<stem>.part-<rank>-of-<world>.jsonl`.
  After a barrier (`wait_for_everyone`) the main process merges: the rows the per-question file
  held before, then the parts' rows in question order (rows of questions outside this run after
  them, in file order); the parts are removed. A fresh run thus writes the bytes one process
  writes. Once the last file is scored the other processes stop (`helpers_stop_here` raises
  `HelpersDone`, which the CLI ends with status 0) and the main process writes the summaries.

Resume keys on the questions, not on the ranks: a resumed run counts every row of the per-question
file and of any part a killed run left as done, whatever number of processes wrote them, and scores
the rest with the processes it has. A single process with no part files left writes straight into
the per-question file, as before sharding existed.

Devices: under a launcher each process puts its local models on its own device (`place_model`,
called by `models.backends.load_backend`): Accelerate's `PartialState().device`, cuda:LOCAL_RANK
where CUDA is (a launch of N processes scores on N GPUs), else the CPU. A process started without
a launcher keeps its models on the CPU, where they load.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from robustvlm.errors import ConfigError
from robustvlm.redact import redact
from robustvlm.runs import (
    CONFIG_FILE,
    append_jsonl,
    claim_run_folder,
    read_jsonl,
    resolved_settings,
    write_jsonl,
)

T = TypeVar("T")
Row = dict[str, Any]

SHARD_FILE = "shard.json"
SHARD_KEY = "shard"  # the settings key `--shard` adds to config.resolved.yaml


class HelpersDone(Exception):
    """Raised on a non-main process of a process group once the command's scoring is done: the
    main process writes the summaries alone; the CLI ends the helper with status 0."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` (0-based) of `count` contiguous blocks of the questions."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """"I/N" -> Shard(I, N); ConfigError unless 0 <= I < N."""
        found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not found or not int(found[1]) < int(found[2]):
            raise ConfigError(f"--shard {text}: expected I/N with 0 <= I < N (shard I of N, counted from 0), e.g. 0/4")
        return cls(int(found[1]), int(found[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def take(self, items: Sequence[T]) -> list[T]:
        """This shard's block of `items`."""
        start, end = block(len(items), self.index, self.count)
        return list(items[start:end])


def block(n: int, index: int, count: int) -> tuple[int, int]:
    """[start, end) of block `index` of `count` over `n` items: sizes n // count, the first
    n % count blocks one larger (Accelerate's `split_between_processes` without padding)."""
    per, extra = divmod(n, count)
    start = index * per + min(index, extra)
    return start, start + per + (index < extra)


@dataclass
class _Command:
    """What this process's command shards (set by the CLI through `begin_command`)."""

    shard: Shard | None = None
    argv: list[str] = field(default_factory=list)
    cwd: str = ""
    merging: bool = False  # `robustvlm merge` recomputes the summaries: nothing may be left to score
    root: Path | None = None  # the first run folder the command claimed (where shard.json goes)
    record: dict[str, Any] = field(default_factory=dict)  # shard.json's content


_command = _Command()


def begin_command(argv: Sequence[str], shard: Shard | None, *, merging: bool = False) -> None:
    """Start a command: its words (`argv`, without the program name), its `--shard`, and whether
    `robustvlm merge` is recomputing summaries (`score_rows` then refuses any question left;
    also kept from an enclosing `merging` block)."""
    global _command
    _command = _Command(shard=shard, argv=list(argv), cwd=os.getcwd(), merging=merging or _command.merging)


def sharded() -> bool:
    """Whether the running command scores one `--shard` of its questions."""
    return _command.shard is not None


def share(items: Sequence[T]) -> list[T]:
    """The questions of this run folder: `items`, or their `--shard` block."""
    return _command.shard.take(items) if _command.shard is not None else list(items)


# ---------------------------------------------------------------- the process group


def world_size() -> int:
    """Processes of the launch (`accelerate launch` / `torchrun` set WORLD_SIZE; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main() -> bool:
    """Whether this is the main process of the launch (rank 0; a single process is)."""
    return int(os.environ.get("RANK", "0")) == 0


@functools.cache
def _state() -> Any:
    """Accelerate's PartialState of this launched process; on a machine without a GPU it uses the
    CPU backend (gloo), as training does."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def _group() -> Any:
    """The PartialState of a launch of several processes (None for one process)."""
    return _state() if world_size() > 1 else None


def process_device() -> Any:
    """The torch.device this process's local models go on, or None to leave them where they load.

    Under a launcher (`torchrun` and `accelerate launch` set LOCAL_RANK, also for one process):
    Accelerate's `PartialState().device`, cuda:LOCAL_RANK where CUDA is, else the CPU. Without a
    launcher: None (a model stays where it loads, the CPU)."""
    return _state().device if "LOCAL_RANK" in os.environ else None


def place_model(model: Any) -> Any:
    """`model` (a torch module) moved onto `process_device()` when that is not the CPU it loaded
    on; returns it. On the CPU nothing moves, so CPU runs are unchanged."""
    device = process_device()
    return model.to(device) if model is not None and device is not None and device.type != "cpu" else model


def wait_for_everyone() -> None:
    """A barrier of the process group (nothing for one process)."""
    group = _group()
    if group is not None:
        group.wait_for_everyone()


def helpers_stop_here() -> None:
    """Call once a command has scored everything: raises HelpersDone on a non-main process."""
    if not is_main():
        raise HelpersDone


# ---------------------------------------------------------------- claiming and scoring


def claim(
    path: str | Path, settings: Any, *, command: str, resume: bool, may_differ: Iterable[str] = ()
) -> Path:
    """`runs.claim_run_folder` for a scoring command: its settings plus `shard: I/N` under
    `--shard`; written (and locked) by the main process only, after the others checked it. The
    first folder a sharded command claims gets shard.json."""
    now = resolved_settings(settings)
    shard = _command.shard
    if shard is not None:
        now = {**now, SHARD_KEY: str(shard)}

    def claim_here(write: bool) -> Path:
        return claim_run_folder(path, now, command=command, resume=resume, may_differ=tuple(may_differ), write=write)

    # the others check the folder as the main process finds it, before it writes (once it has, a
    # folder it claims inside this one, such as blind/, would count as finished work)
    folder = Path(path) if is_main() else claim_here(write=False)
    wait_for_everyone()
    if is_main():
        folder = claim_here(write=True)
    if shard is not None and _command.root is None:
        _command.root = folder
        _command.record = {"shard": str(shard), "command": command, "argv": [redact(a) for a in _command.argv],
                           "cwd": _command.cwd, "settings_sha256": settings_digest(now), "row_files": {}}
        _write_record()
    return folder


def settings_digest(settings: Mapping[str, Any]) -> str:
    """sha256 of resolved settings without the shard key (the same for every shard of a run)."""
    rest = {k: v for k, v in settings.items() if k != SHARD_KEY}
    return hashlib.sha256(yaml.safe_dump(rest, sort_keys=True).encode("utf-8")).hexdigest()


def keys_digest(keys: Iterable[Hashable]) -> str:
    """sha256 of question keys in order: which questions a per-question file covers."""
    return hashlib.sha256("\n".join(json.dumps(k, default=str) for k in keys).encode("utf-8")).hexdigest()


def _write_record() -> None:
    if _command.root is not None and is_main():
        tmp = _command.root / (SHARD_FILE + ".tmp")
        tmp.write_text(json.dumps(_command.record, indent=2) + "\n", encoding="utf-8")
        tmp.replace(_command.root / SHARD_FILE)


def part_path(path: Path, rank: int, world: int) -> Path:
    """The part file of process `rank` of `world` beside the per-question file `path`."""
    return path.with_name(f"{path.stem}.part-{rank}-of-{world}{path.suffix}")


def part_files(path: Path) -> list[Path]:
    """The part files beside `path` (of any rank and number of processes), sorted."""
    return sorted(path.parent.glob(f"{glob_escape(path.stem)}.part-*-of-*{glob_escape(path.suffix)}"))


def glob_escape(text: str) -> str:
    """`text` with glob's special characters taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def score_rows(
    path: Path,
    items: Sequence[T],
    *,
    key: Callable[[T], Hashable],
    row_key: Callable[[Mapping[str, Any]], Hashable],
    score: Callable[[list[T]], Iterable[list[Row]]],
    resume: bool,
) -> list[Row]:
    """The per-question rows of this run's share of `items` (all, or the `--shard` block), in
    `items` order, after scoring those not yet in `path` (see the module doc).

    Args:
        path: the per-question JSONL file (its folder is created).
        items: every question of the run, in their stable order.
        key: a question's key; row_key: the same key read from its row.
        score: yields the rows of a list of questions, a batch at a time (only called with work).
        resume: keep the rows already written (without it the file and any parts start empty).
    """
    mine = share(items)
    if is_main():
        _prepare(path, resume)
        if _command.shard is not None and _command.root is not None:
            _command.record["row_files"][path.relative_to(_command.root).as_posix()] = {
                "questions": len(items), "keys_sha256": keys_digest(key(it) for it in items)}
            _write_record()
    wait_for_everyone()
    parts = part_files(path)
    done = {row_key(r): r for p in (path, *parts) for r in read_jsonl(p)}
    todo = [it for it in mine if key(it) not in done]
    if todo and _command.merging:
        raise ConfigError(f"{path}: {len(todo)} question(s) have no row in the merged shards; merge "
                          "joins finished shards only")
    group = _group()
    if group is None and not parts:  # one process: straight into the per-question file
        _score_into(path, todo, score, done, row_key)
        return [done[key(it)] for it in mine]
    rank, world = (group.process_index, group.num_processes) if group is not None else (0, 1)
    with group.split_between_processes(todo) if group is not None else nullcontext(todo) as own:
        _score_into(part_path(path, rank, world), list(own), score, {}, row_key)
    wait_for_everyone()
    if is_main():
        merge_parts(path, [key(it) for it in mine], row_key)
    wait_for_everyone()
    done = {row_key(r): r for r in read_jsonl(path)}
    return [done[key(it)] for it in mine]


def _prepare(path: Path, resume: bool) -> None:
    """Main process, before anyone reads: the folder made; with resume, torn last lines of the
    file and its parts repaired (`read_jsonl` rewrites them); without, the file emptied and the
    parts removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if resume:
        for p in (path, *part_files(path)):
            read_jsonl(p)
        return
    path.unlink(missing_ok=True)  # written afresh once the first rows are scored (`_score_into`)
    for p in part_files(path):
        p.unlink()


def _score_into(
    path: Path, todo: list[T], score: Callable[[list[T]], Iterable[list[Row]]], done: dict[Hashable, Row],
    row_key: Callable[[Mapping[str, Any]], Hashable],
) -> None:
    """Append the rows of `todo` to `path` as they are scored (and to `done`). The file is opened
    at the first rows, so a run refused while its model loads (a bad key, an unreachable server)
    leaves none; it exists once scoring ends, empty when nothing was left to score."""
    with ExitStack() as stack:
        log = None
        for rows in score(todo) if todo else ():
            if log is None:
                log = stack.enter_context(path.open("a", encoding="utf-8"))
            append_jsonl(log, rows)
            done.update((row_key(r), r) for r in rows)
    path.touch()


def merge_parts(path: Path, order: Sequence[Hashable], row_key: Callable[[Mapping[str, Any]], Hashable]) -> None:
    """Fold the part files beside `path` into it: its rows, then the parts' new rows in `order`,
    then any other new rows in file order; the parts are removed."""
    parts = part_files(path)
    kept = read_jsonl(path)
    have = {row_key(r) for r in kept}
    new: dict[Hashable, Row] = {}
    for part in parts:
        for row in read_jsonl(part):
            if row_key(row) not in have:
                new.setdefault(row_key(row), row)
    ordered = [new.pop(k) for k in dict.fromkeys(order) if k in new]
    write_jsonl(path, [*kept, *ordered, *new.values()])
    for part in parts:
        part.unlink()


@contextmanager
def merging() -> Iterator[None]:
    """While the block runs, a command started through the CLI recomputes merged results: any
    question without a row is an error rather than scored."""
    global _command
    before = _command
    _command = _Command(merging=True)
    try:
        yield
    finally:
        _command = before


def shard_record(folder: Path) -> dict[str, Any]:
    """shard.json of a run folder written with `--shard` ({} when there is none)."""
    path = folder / SHARD_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def stored_settings(folder: Path) -> dict[str, Any]:
    """A run folder's config.resolved.yaml as a dict ({} when absent)."""
    path = folder / CONFIG_FILE
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}
