"""The linear unit tests' protocol: random hyperparameter search, selection, several data seeds.

As in the authors' release (facebookresearch/InvarianceUnitTests, `scripts/sweep.py`,
`scripts/main.py`, `scripts/collect_results.py`):

- a *draw* is one hyperparameter setting: draw 0 takes the defaults (Adam lr 1e-3, no weight
  decay, the objective's declared defaults), draw k > 0 samples lr ~ 10^U(-4, -2), weight
  decay ~ 10^U(-6, -2) and every method hyperparameter from the search range its objective
  declares (`HParam.search`); step counts (`anneal_steps`, `k_skip`) are bounded by half the
  run, so every penalty is on for at least half of it. A draw depends on the draw index and
  the objective only, so it is the same across data seeds, and the oracle shares ERM's draws.
- `irm_paper` is IRMv1 searched as the paper searched it: the objective (1 - l) R + l R_inv of
  their release is R + (l / (1 - l)) R_inv up to a factor Adam removes, with
  l = 1 - 10^U(-3, -0.3) (a weight of 1 to 999; default l = 0.9), R_inv summed over the
  environments, the plain (biased) square, on from the first step. It shares `irm`'s lr and
  weight decay draws.
- a *data seed* draws the problem (its weights and environment parameters) and its rows:
  training and validation rows from the training split (the oracle: both from the test split,
  where the spurious block is shuffled), test rows from the test split, `n_per_env` each.
- every (draw, data seed) trains one linear model (`linear.fit.fit_linear`);
- selection: the draw with the smallest validation error summed over the environments and
  averaged over the data seeds (training-environment validation: the test split is never
  looked at);
- the result: the selected draw's test error averaged over the environments (mean over
  seeds), with the standard deviation over seeds (ddof 0) averaged over the environments.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robustvlm.data.synth.linear_unit_tests import make_unit_test
from robustvlm.errors import ConfigError
from robustvlm.linear.fit import LinearData, errors, fit_linear
from robustvlm.objectives import build_objective
from robustvlm.objectives.search import draw_hparams, sample_value

ORACLE = "oracle"
IRM_PAPER = "irm_paper"
METHODS = ("erm", "irm", IRM_PAPER, "vrex", "groupdro", "birm", "dynamic_birm", ORACLE)
OBJECTIVES = {ORACLE: "erm", IRM_PAPER: "irm"}
"""The objective of each method that is not itself an objective."""
PAPER_IRM_DEFAULT = 0.9
PAPER_IRM_FIXED = {"anneal_steps": 0, "penalty_reduction": "sum", "unbiased": False}
OPTIMIZER_DEFAULTS = {"lr": 1e-3, "weight_decay": 0.0}
OPTIMIZER_SEARCH = {"lr": ("log", 1e-4, 1e-2), "weight_decay": ("log", 1e-6, 1e-2)}


@dataclass(frozen=True)
class Protocol:
    """Sizes of one sweep; the defaults are the published sweep's (`scripts/sweep.py`).

    Attributes:
        n_envs, dim_inv, dim_spu: the problems' environments and input dimensions.
        n_per_env: rows per environment in each of the training, validation and test sets.
        steps: full-batch Adam steps per model.
        n_draws: hyperparameter draws per (example, method) (draw 0 = defaults).
        n_seeds: data seeds per draw.
    """

    n_envs: int = 3
    dim_inv: int = 5
    dim_spu: int = 5
    n_per_env: int = 10_000
    steps: int = 10_000
    n_draws: int = 20
    n_seeds: int = 50

    def __post_init__(self) -> None:
        for name in ("n_per_env", "steps", "n_draws", "n_seeds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"linear unit tests: {name} must be >= 1, got {getattr(self, name)}")


def objective_name(method: str) -> str:
    """The objective a method trains with (the oracle is ERM on the test distribution)."""
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    return OBJECTIVES.get(method, method)


def paper_irm_args(irm_lambda: float) -> dict[str, Any]:
    """IRMv1 arguments equivalent to the paper's (1 - l) R + l R_inv with l = `irm_lambda`."""
    return {"lambda": irm_lambda / (1 - irm_lambda), **PAPER_IRM_FIXED}


def draw_config(method: str, draw: int, steps: int) -> dict[str, Any]:
    """{"lr", "weight_decay", "method_args"} of hyperparameter draw `draw` (0: the defaults)."""
    name = objective_name(method)
    if method == IRM_PAPER:
        if draw == 0:
            return {**OPTIMIZER_DEFAULTS, "method_args": paper_irm_args(PAPER_IRM_DEFAULT)}
        rng = np.random.default_rng([draw, zlib.crc32(name.encode())])
        optimizer = {k: sample_value(rule, rng) for k, rule in OPTIMIZER_SEARCH.items()}
        return {**optimizer, "method_args": paper_irm_args(1 - 10 ** rng.uniform(-3, -0.3))}
    return draw_hparams(
        name,
        draw,
        steps=steps,
        optimizer_defaults=OPTIMIZER_DEFAULTS,
        optimizer_search=OPTIMIZER_SEARCH,
    )


@dataclass
class Run:
    """One trained model: a (draw, data seed) of one example and method.

    Attributes:
        validation: [E] validation error per training environment.
        test: [E] test error per environment.
        trace: the objective's R_emp / R_inv / lambda over training (when traced).
    """

    draw: int
    seed: int
    config: dict[str, Any]
    validation: list[float]
    test: list[float]
    diverged: bool
    trace: list[dict[str, float]] = field(default_factory=list)


def run_one(
    example: str, method: str, draw: int, seed: int, protocol: Protocol, *, trace_every: int = 0
) -> Run:
    """Train and score one model (see the module doc for the data of each split)."""
    problem = make_unit_test(
        example,
        n_envs=protocol.n_envs,
        dim_inv=protocol.dim_inv,
        dim_spu=protocol.dim_spu,
        seed=seed,
    )
    fit_split = "test" if method == ORACLE else "train"
    train = problem.sample(fit_split, protocol.n_per_env, stream=0)
    validation = problem.sample(fit_split, protocol.n_per_env, stream=1)
    test = problem.sample("test", protocol.n_per_env, stream=2)
    config = draw_config(method, draw, protocol.steps)
    objective = build_objective(objective_name(method), problem.env_names, config["method_args"])
    fit = fit_linear(
        objective,
        LinearData.from_envs(train, problem.task),
        lr=config["lr"],
        weight_decay=config["weight_decay"],
        steps=protocol.steps,
        seed=draw,
        trace_every=trace_every,
    )
    return Run(
        draw=draw,
        seed=seed,
        config=config,
        validation=errors(fit.weights, validation, problem.task),
        test=errors(fit.weights, test, problem.task),
        diverged=fit.diverged,
        trace=fit.trace,
    )


@dataclass
class Selection:
    """The selected draw of one (example, method) and its test error.

    Attributes:
        draw: the selected draw; config: its hyperparameters.
        mean: test error averaged over environments and seeds.
        std: standard deviation over seeds (ddof 0), averaged over environments.
        per_env: [E] test error per environment, averaged over seeds.
        validation: the selected draw's selection score (summed validation error, seed mean).
        diverged: runs (over all draws and seeds) whose training diverged.
    """

    draw: int
    config: dict[str, Any]
    mean: float
    std: float
    per_env: list[float]
    validation: float
    diverged: int


def select(runs: list[Run]) -> Selection:
    """Training-environment validation: the draw with the smallest seed-mean summed validation error.

    A draw with a diverged (NaN) run scores infinity; if every draw diverged, the result is NaN.
    """
    draws = sorted({r.draw for r in runs})
    scores = {}
    for d in draws:
        totals = [sum(r.validation) for r in runs if r.draw == d]
        scores[d] = float(np.mean(totals)) if all(map(math.isfinite, totals)) else math.inf
    best = min(draws, key=lambda d: (scores[d], d))
    chosen = [r for r in runs if r.draw == best]
    test = np.array([r.test for r in chosen])  # [seeds, E]
    return Selection(
        draw=best,
        config=chosen[0].config,
        mean=float(test.mean(0).mean()),
        std=float(test.std(0).mean()),
        per_env=test.mean(0).tolist(),
        validation=scores[best],
        diverged=sum(r.diverged for r in runs),
    )
