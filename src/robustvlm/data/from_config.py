"""Turn a `data:` config section into records: synthesise a built-in benchmark or load a path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from robustvlm.config import DataConfig, RecordSource
from robustvlm.data.carve import carve_per_env, hold_out, short_environments
from robustvlm.data.records import EnvRecord, Example, SkipLog

Record = TypeVar("Record", bound=EnvRecord)


def materialize(cfg: RecordSource, work_dir: Path) -> Path:
    """The data path of this config; a built-in benchmark is synthesised once into `work_dir/data`."""
    if cfg.path is not None:
        return cfg.path if cfg.on_hub else Path(cfg.path)  # type: ignore[return-value]
    from robustvlm.data.synth import synthesize

    target = Path(work_dir) / "data"
    manifest = target / "manifest.json"
    if manifest.is_file():
        info = json.loads(manifest.read_text(encoding="utf-8"))
        if info.get("benchmark") == cfg.benchmark and info.get("seed") == cfg.seed:
            return target
    assert cfg.benchmark is not None  # RecordSource: exactly one of path and benchmark
    synthesize(cfg.benchmark, target, seed=cfg.seed, n_per_env=cfg.n_per_env)
    return target


def load_from_config(
    cfg: DataConfig, work_dir: Path, skip_log: SkipLog | None = None, verbose: bool = True
) -> list[Example]:
    """All records of the configured dataset (every split), with environments assigned; with
    `split_per_env`, each environment carved into its train / test sets; with
    `holdout_fraction`, each environment's held-out `val` part set aside (`carve.hold_out`)."""
    from robustvlm.data.environments import format_env_counts
    from robustvlm.data.loaders import HubSelection, LoadOptions, load_examples

    options = LoadOptions(
        fmt=cfg.format,
        env_column=cfg.env_column,
        env_map=cfg.env_map,
        task_rules=cfg.task_rules,
        instruction_template=cfg.instruction_template,
        max_pixels=cfg.max_pixels,
        image_root=cfg.image_root,
        allow_outside_root=cfg.allow_outside_root,
        hub=HubSelection(tuple(cfg.subsets), cfg.max_rows_per_subset, cfg.seed) if cfg.on_hub else None,
    )
    examples = load_examples(
        materialize(cfg, work_dir),
        options,
        on_bad_record=cfg.on_bad_record,
        skip_log=skip_log,
        verbose=verbose and cfg.split_per_env is None and cfg.holdout_fraction is None,
    )
    if cfg.split_per_env is not None:
        sizes = cfg.split_per_env
        examples, counts = carve_per_env(examples, train=sizes.train, test=sizes.test, seed=cfg.seed)
        if verbose:
            for line in short_environments(counts):
                print(f"warning: {line}")
    if cfg.holdout_fraction is not None:
        examples = hold_out(examples, cfg.holdout_fraction, seed=cfg.seed)
    if verbose and (cfg.split_per_env is not None or cfg.holdout_fraction is not None):
        print(format_env_counts(examples))
    return examples


def training_examples(examples: list[Record], max_per_env: int | None = None) -> list[Record]:
    """In-domain training records, optionally capped per environment (first N in file order)."""
    kept: list[Record] = []
    seen: dict[str, int] = {}
    for ex in examples:
        if ex.split != "train" or ex.ood:
            continue
        if max_per_env is not None and seen.get(ex.env, 0) >= max_per_env:
            continue
        seen[ex.env] = seen.get(ex.env, 0) + 1
        kept.append(ex)
    return kept
