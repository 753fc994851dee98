"""The printed plan of a multi-run command's `--dry-run` (`study`, `sweep`, `rm matrix`).

A plan is one tab-separated row per run (its coordinates, e.g. label and seed, then its objective
or loss, model, trainable parts, optimisation steps, batch and folder) and a budget line (runs,
optimisation steps, training examples seen). The rows come from the validated run configs alone:
nothing is trained, no model is loaded. A run whose `train.steps` is unset trains for
`train.epochs` epochs of data not yet read, so its steps read "N epochs" and the budget counts it
apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from robustvlm.config import ModelConfig, RecordSource, TrainConfig

NOTHING_TRAINED = "dry run: nothing was trained; run without --dry-run to train (or --smoke for a tiny real run)"


@dataclass(frozen=True)
class PlannedRun:
    """One run of a plan: its coordinates (`keys`, e.g. (label, seed)), its objective or loss,
    its model and train sections, and the folder it will write."""

    keys: tuple[object, ...]
    method: str
    model: ModelConfig
    train: TrainConfig
    folder: Path

    @property
    def batch(self) -> int:
        """Examples per optimisation step (batch size x accumulation, one process)."""
        return self.train.batch_size * self.train.grad_accum


def steps_text(train: TrainConfig) -> str:
    """A run's optimisation steps, or its epochs where the steps are unset."""
    return str(train.steps) if train.steps is not None else f"{train.epochs:g} epochs"


def data_text(data: RecordSource) -> str:
    """Where a run's records come from: the path or built-in benchmark, and its size cap."""
    source = data.path or f"built-in {data.benchmark}"
    return source if data.n_per_env is None else f"{source} ({data.n_per_env} per environment)"


def run_table(key_names: Sequence[str], runs: Sequence[PlannedRun]) -> list[str]:
    """The header and one tab-separated row per run: the keys, then method, model, trainable,
    steps, batch and folder."""
    header = [*key_names, "method", "model", "trainable", "steps", "batch", "folder"]
    rows = [
        [*map(str, run.keys), run.method, run.model.name, run.model.trainable, steps_text(run.train),
         str(run.batch), str(run.folder)]
        for run in runs
    ]
    return ["\t".join(row) for row in [header, *rows]]


def budget_line(runs: Sequence[PlannedRun], shape: str) -> str:
    """"budget: N runs (`shape`), S optimisation steps, E training examples", runs counted in
    epochs named apart."""
    fixed = [run for run in runs if run.train.steps is not None]
    line = f"budget: {len(runs)} runs ({shape}), "
    if not fixed:
        return line + "each counted in epochs of data not yet read"
    steps = sum(run.train.steps or 0 for run in fixed)
    examples = sum((run.train.steps or 0) * run.batch for run in fixed)
    unknown = len(runs) - len(fixed)
    return line + f"{steps:,} optimisation steps, {examples:,} training examples" + (
        f" (+ {unknown} runs counted in epochs)" if unknown else "")
