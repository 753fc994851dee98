"""Random hyperparameter draws from the search ranges the objectives declare (`HParam.search`)."""

from __future__ import annotations

import zlib
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


STEP_HPARAMS = ("anneal_steps", "k_skip")
"""Step-count hyperparameters whose search range `draw_hparams` bounds by half the run."""


def draw_hparams(
    objective: str,
    draw: int,
    *,
    steps: int,
    optimizer_defaults: Mapping[str, Any],
    optimizer_search: Mapping[str, tuple],
) -> dict[str, Any]:
    """Hyperparameter draw `draw` of one objective, as a random search (DomainBed's sweep) takes it.

    Draw 0 is the defaults: `optimizer_defaults` and no method argument (the objective's declared
    defaults). Draw k > 0 seeds a generator with (k, crc32 of the objective's name), draws every
    optimizer setting of `optimizer_search` (in its order), then every method hyperparameter from
    the search range its objective declares (`HParam.search`); step counts (`STEP_HPARAMS`) are
    bounded by `steps // 2`, so every penalty is on for at least half of the run. A draw depends on
    (objective, draw, steps) only, so every trial seed of a sweep trains the same draw.

    Returns:
        {**optimizer settings, "method_args": {name: value}}.
    """
    from robustvlm.objectives import REGISTRY

    if objective not in REGISTRY:
        raise ConfigError(f"unknown method {objective!r}; choose one of {sorted(REGISTRY)}")
    if draw == 0:
        return {**optimizer_defaults, "method_args": {}}
    rng = np.random.default_rng([draw, zlib.crc32(objective.encode())])
    optimizer = {k: sample_value(tuple(rule), rng) for k, rule in optimizer_search.items()}
    hparams = REGISTRY[objective].hparams
    bounded = {}
    for key in STEP_HPARAMS:
        if key in hparams and (search := hparams[key].search) is not None:
            kind, low, high = search
            bounded[key] = (kind, low, max(low, min(high, steps // 2)))
    return {**optimizer, "method_args": sample_hparams(hparams, rng, bounded)}
