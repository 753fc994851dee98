"""`robustvlm merge`: join the run folders of `--shard I/N` runs into the folder one run writes.

Checks, each refused in one line naming the folders (`sharding` writes what they read):
- every folder holds a shard run (its shard.json);
- all were written by one command with the same settings apart from the shard (their
  config.resolved.yaml, and the settings hash in shard.json), over the same questions (per
  per-question file: their number and a hash of their keys);
- their shards are 0..N-1 of one N, each once (an overlap names the folders holding one shard
  twice, a gap the shards missing);
- every shard is finished: each per-question file holds one row per question of its block.

Then `merge_shards` writes into OUT every config.resolved.yaml of the shards (without the shard
key) and each per-question file, the shards' rows in shard order: the blocks are contiguous, so
this is the question order one run writes. The CLI then runs the shards' command line again on
OUT with `--resume` and without `--shard` (`MergePlan.argv`), under `sharding.merging`: every
question has its row, nothing is scored, and the summaries (results.csv, metrics.json, reports)
are computed from the merged rows as one run computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robustvlm.errors import ConfigError
from robustvlm.runs import (
    CONFIG_FILE,
    check_output_folder,
    differing_keys,
    read_input_jsonl,
    stored_command,
    write_jsonl,
    write_settings,
)
from robustvlm.sharding import SHARD_KEY, Shard, block, shard_record, stored_settings


@dataclass(frozen=True)
class ShardRun:
    """One folder given to merge: its shard and its shard.json."""

    folder: Path
    shard: Shard
    record: dict[str, Any]


@dataclass(frozen=True)
class MergePlan:
    """What the CLI runs to finish a merge: the command line (`--out` OUT, `--resume`, no `--shard`)
    in the folder the shards were started from (`cwd`, when it exists here)."""

    argv: list[str]
    cwd: Path


def read_shards(folders: Sequence[str | Path]) -> list[ShardRun]:
    """The shard runs of `folders`, sorted by shard index; ConfigError for a folder that holds none."""
    runs = []
    for given in folders:
        folder = Path(given)
        record = shard_record(folder) if folder.is_dir() else {}
        if not record:
            raise ConfigError(f"{folder}: not a shard run (no shard.json); merge joins folders written with --shard I/N")
        runs.append(ShardRun(folder, Shard.parse(record["shard"]), record))
    return sorted(runs, key=lambda r: r.shard.index)


def check_together(runs: Sequence[ShardRun]) -> None:
    """ConfigError (one line) unless `runs` are the finished shards 0..N-1 of one run (module doc)."""
    first = runs[0]
    for run in runs[1:]:
        if run.record["command"] != first.record["command"]:
            raise ConfigError(f"{first.folder} and {run.folder} are runs of different commands "
                              f"({first.record['command']!r}, {run.record['command']!r})")
        keys = differing_keys(stored_settings(first.folder), stored_settings(run.folder), may_differ=(SHARD_KEY,))
        if keys or run.record["settings_sha256"] != first.record["settings_sha256"]:
            raise ConfigError(f"{first.folder} and {run.folder} are not shards of one run: their settings differ in "
                              f"{keys or ['(the settings hash)']}")
        if _question_sets(run) != _question_sets(first):
            raise ConfigError(f"{first.folder} and {run.folder} are not shards of one run: they split different "
                              "questions (per-question files, counts or question keys differ)")
    counts = sorted({r.shard.count for r in runs})
    if len(counts) > 1:
        raise ConfigError("shards of different N: " + ", ".join(f"{r.folder} ({r.shard})" for r in runs))
    count = counts[0]
    seen: dict[int, Path] = {}
    for run in runs:
        if run.shard.index in seen:
            raise ConfigError(f"overlapping shards: {seen[run.shard.index]} and {run.folder} both hold shard "
                              f"{run.shard}")
        seen[run.shard.index] = run.folder
    missing = [f"{i}/{count}" for i in range(count) if i not in seen]
    if missing:
        raise ConfigError(f"missing shards: {', '.join(missing)} (given {len(runs)} of {count}); run them with "
                          "--shard, then merge all")
    for run in runs:
        _check_finished(run)


def _question_sets(run: ShardRun) -> dict[str, tuple[int, str]]:
    return {rel: (int(v["questions"]), str(v["keys_sha256"])) for rel, v in run.record["row_files"].items()}


def _check_finished(run: ShardRun) -> None:
    """ConfigError unless each per-question file of `run` holds a row per question of its block."""
    for rel, (n, _) in _question_sets(run).items():
        start, end = block(n, run.shard.index, run.shard.count)
        rows = read_input_jsonl(run.folder / rel, "per-question file") if (run.folder / rel).is_file() else []
        if len(rows) != end - start:
            raise ConfigError(f"shard {run.shard} in {run.folder} is unfinished: {rel} holds {len(rows)} of its "
                              f"{end - start} rows; run it again with --resume, then merge")


def merge_shards(folders: Sequence[str | Path], out: Path) -> MergePlan:
    """Check the shards (`check_together`), write OUT's settings and merged per-question files;
    returns the command line that writes the summaries (module doc)."""
    runs = read_shards(folders)
    check_together(runs)
    check_output_folder(out)
    if out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty: merge writes a new run folder; choose a new --out")
    first = runs[0].folder
    for config in sorted(first.rglob(CONFIG_FILE)):
        target = out / config.relative_to(first)
        target.parent.mkdir(parents=True, exist_ok=True)
        settings = {k: v for k, v in stored_settings(config.parent).items() if k != SHARD_KEY}
        write_settings(settings, target, stored_command(config))
    for rel in runs[0].record["row_files"]:
        rows = [row for run in runs for _, row in read_input_jsonl(run.folder / rel, "per-question file")]
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(out / rel, rows)
    cwd = Path(runs[0].record["cwd"])
    return MergePlan(rerun_argv(runs[0].record["argv"], out), cwd if cwd.is_dir() else Path.cwd())


def rerun_argv(argv: Sequence[str], out: Path) -> list[str]:
    """A shard's command line with `--shard` removed, `--out` set to `out` and `--resume` added."""
    words: list[str] = []
    given = iter(argv)
    for word in given:
        if word in ("--shard", "--out"):
            next(given, None)
        if word == "--out" or word.startswith("--out="):
            words += ["--out", str(out)]
        elif not (word == "--shard" or word.startswith("--shard=")):
            words.append(word)
    return words if "--resume" in words else [*words, "--resume"]
