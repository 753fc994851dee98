"""Independent references for the paired tables' tests: a numpy percentile bootstrap of a mean
difference and the parser of a table's "mean [lo, hi]" cell."""

from __future__ import annotations

import numpy as np


def bootstrap(d: np.ndarray) -> tuple[float, float]:
    """The percentile 95% interval of mean(d) over 2,000 resamples of the questions (seed 0)."""
    draws = np.random.default_rng(0).integers(0, d.size, size=(2000, d.size))
    lo, hi = np.quantile(d[draws].mean(axis=1), [0.025, 0.975])
    return float(lo), float(hi)


def parse_interval(cell: str) -> tuple[float, float, float]:
    """"+0.100 [-0.050, +0.250]" -> (0.1, -0.05, 0.25)."""
    mean, rest = cell.split(" [")
    lo, hi = rest.rstrip("]").split(", ")
    return float(mean), float(lo), float(hi)
