"""The logged row of one optimizer step: the mean over its micro-batches and processes.

A task's `training_step` returns one row per micro-batch ({name: float}, each the mean over that
micro-batch on that process). The step's row is, per name, the plain mean of the values of every
(process, micro-batch) that reported the name (`risk/<env>` is absent where the environment was):
with equal micro-batch sizes, as the samplers give, that is the full-batch mean, and for the loss
it is exactly the objective the accumulated, process-averaged gradient follows.
"""

from __future__ import annotations

from typing import Any


def mean_rows(rows: list[dict[str, float]]) -> dict[str, float]:
    """Per-name means over the rows that hold the name (names in first-seen order); a value
    every row reported identically (a penalty weight, a counter) is kept bit for bit."""
    values: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            values.setdefault(key, []).append(float(value))
    return {k: v[0] if len(set(v)) == 1 else sum(v) / len(v) for k, v in values.items()}


def step_row(rows: list[dict[str, float]], accelerator: Any) -> dict[str, float]:
    """The logged row of a step from this process's micro-batch rows, averaged with every other
    process's (a collective call when there are several: every process must make it)."""
    if accelerator.num_processes > 1:
        from accelerate.utils import gather_object

        rows = gather_object(list(rows))
    return mean_rows(rows)
