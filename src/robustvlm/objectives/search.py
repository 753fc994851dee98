"""Random hyperparameter draws from the search ranges the objectives declare (`HParam.search`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from robustvlm.errors import ConfigError
from robustvlm.objectives.base import HParam


def sample_value(rule: tuple, rng: np.random.Generator) -> Any:
    """One value from a search rule (see `HParam.search`).

    ("log", lo, hi): 10^U(log10 lo, log10 hi); ("int_log", lo, hi): the same, rounded to an
    integer in [lo, hi]; ("uniform", lo, hi): U(lo, hi); ("choice", v1, v2, ...): one of the
    values, equally likely.
    """
    kind, *args = rule
    if kind == "choice":
        return args[int(rng.integers(len(args)))]
    lo, hi = args
    if kind == "uniform":
        return float(rng.uniform(lo, hi))
    if kind in ("log", "int_log"):
        value = 10.0 ** rng.uniform(np.log10(lo), np.log10(hi))
        return int(min(hi, max(lo, round(value)))) if kind == "int_log" else float(value)
    raise ConfigError(f"unknown search rule {rule!r}")


def sample_hparams(
    hparams: Mapping[str, HParam],
    rng: np.random.Generator,
    ranges: Mapping[str, tuple] | None = None,
) -> dict[str, Any]:
    """One random draw of every searched hyperparameter (those without a range keep their default).

    Args:
        hparams: an objective's declared hyperparameters (`Objective.hparams`).
        rng: the draw's generator (seed it per draw for reproducible sweeps).
        ranges: search rules that replace the declared ones, by name (e.g. step counts
            bounded by a short run's length).

    Returns:
        {name: value} for every hyperparameter that has a search rule, in declaration order.
    """
    ranges = ranges or {}
    drawn = {}
    for name, hp in hparams.items():
        rule = ranges.get(name, hp.search)
        if rule is not None:
            drawn[name] = sample_value(rule, rng)
    return drawn
