"""The linear unit tests' protocol: random hyperparameter search, selection, several data seeds.

As in the authors' release (facebookresearch/InvarianceUnitTests, `scripts/models.py`,
`scripts/sweep.py`, `scripts/main.py`, `scripts/collect_results.py`):

- a *draw* is one hyperparameter setting. Draw 0 takes the defaults: Adam lr 1e-3, no weight
  decay, IRMv1's irm_lambda 0.9, every other objective's declared defaults. Draw k > 0 is the
  authors' model seed k, value for value: their `main.py` seeds Python's `random` with k + 1000
  and their `models.py` then draws lr = 10^U(-4, -2), weight decay = 10^U(-6, -2) and, for
  IRMv1, irm_lambda = 1 - 10^U(-3, -0.3) in that order, so ERM, the oracle and IRMv1 share lr
  and weight decay, and every data seed gets the same draw. Every hyperparameter set in their
  published tables is one of draws 0-19 (tests/linear/test_protocol.py). V-REx, GroupDRO, BIRM
  and Dynamic BIRM, which the authors did not run, share those lr and weight-decay draws and sample their own hyperparameters from the search
  ranges their objectives declare (`HParam.search`), step counts (`anneal_steps`, `k_skip`)
  bounded by half the run so that every penalty is on for at least half of it.
- IRMv1 is trained as theirs: (1 - l) R + l R_inv with l = irm_lambda, R_inv the plain squares of
  each environment's dummy gradients summed over the environments, on from the first step. Adam
  removes a constant factor of the loss but not of its L2 term, so this is `irm` with weight
  l / (1 - l) and weight decay wd / (1 - l) (`paper_irm_config`). Like theirs, the penalty
  squares the gradients of both a scale and a shift dummy on f(x) (`shift_dummy`).
- `irm_eiil` and `dynamic_birm_eiil` train IRMv1 and Dynamic BIRM (same draws) on two
  environments inferred by EIIL from a reference ERM model instead of the given ones
  (`linear.inferred`); the run records the split's purity against the given environments.
- a *data seed* draws the problem (its weights and environment parameters) and its rows:
  training and validation rows from the training split (the oracle: both from the test split,
  where the spurious block is shuffled), test rows from the test split; `n_per_env` training
  rows and `n_eval_per_env` validation and test rows per environment (the authors: 10,000 each;
  scoring is cheap, so the smaller budgets keep the authors' evaluation sizes).
- every (draw, data seed) trains one linear model (`linear.fit.fit_linear`); the models of one
  (example, method) train together where its objective declares a batched form
  (`Objective.batched`, `linear.batched`), else one at a time, with a logged line naming it;
- selection: the draw with the smallest validation error summed over the environments and
  averaged over the data seeds (training-environment validation: the test split is never
  looked at);
- the result: the selected draw's test error averaged over the environments (mean over
  seeds), with the standard deviation over seeds (ddof 0) averaged over the environments.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any, Literal

import numpy as np
import torch

from robustvlm.data.synth.linear_unit_tests import EnvSample, LinearUnitTest, Task, make_unit_test
from robustvlm.errors import ConfigError
from robustvlm.linear.batched import batched_objectives, fit_linear_cell
from robustvlm.linear.fit import LinearData, LinearFit, errors, fit_linear
from robustvlm.linear.inferred import INFERRED_ENVS, InferredEnvs, eiil_environments
from robustvlm.objectives import INVARIANCE, REGISTRY, applicable_methods, build_objective
from robustvlm.objectives.linear_cell import Cell
from robustvlm.objectives.search import draw_hparams
from robustvlm.redact import redacted_logger

logger = redacted_logger(__name__)

ORACLE = "oracle"
INFERRED = {"irm_eiil": "irm", "dynamic_birm_eiil": "dynamic_birm"}
"""Methods trained on EIIL's inferred environments, and the method whose draws they take."""


def linear_methods() -> tuple[str, ...]:
    """The methods every sweep trains by default: each objective of the registry that declares it
    applies to the linear unit tests (`Objective.applies_to`; read when called, so that one
    registered later, by a plugin, is among them), then the oracle."""
    return (*applicable_methods(INVARIANCE), ORACLE)


def all_methods() -> tuple[str, ...]:
    """Every method a sweep can train: `linear_methods()` and the ones on EIIL's environments."""
    return (*linear_methods(), *INFERRED)


def method_label(method: str) -> str:
    """How tables name a method: its objective's registered label ("IRMv1"), "Oracle", or the
    label of the method trained on EIIL's environments ("IRMv1, EIIL environments")."""
    if method == ORACLE:
        return "Oracle"
    if method in INFERRED:
        return f"{REGISTRY[INFERRED[method]].label}, EIIL environments"
    return REGISTRY[method].label


METHODS = linear_methods()
"""The methods every sweep trains by default, as registered at import (the CLI's help lists them)."""
ALL_METHODS = all_methods()
OBJECTIVES = {ORACLE: "erm", **INFERRED}
"""The objective of each method that is not itself an objective."""
PAPER_IRM_LAMBDA = 0.9
PAPER_IRM_LAMBDA_EXPONENT = (-3.0, -0.3)
"""irm_lambda = 1 - 10^U(-3, -0.3): a penalty weight l / (1 - l) of 1 to 999."""
PAPER_IRM_FIXED = {"anneal_steps": 0, "penalty_reduction": "sum", "unbiased": False, "shift_dummy": True}
OPTIMIZER_DEFAULTS = {"lr": 1e-3, "weight_decay": 0.0}
OPTIMIZER_EXPONENTS = {"lr": (-4.0, -2.0), "weight_decay": (-6.0, -2.0)}
"""lr = 10^U(-4, -2), weight decay = 10^U(-6, -2), as the authors draw them."""
OPTIMIZER_SEARCH = {k: ("log", 10**low, 10**high) for k, (low, high) in OPTIMIZER_EXPONENTS.items()}
MODEL_SEED_OFFSET = 1000
"""The authors seed Python's `random` with model seed + 1000 before drawing a model's hyperparameters."""


@dataclass(frozen=True)
class Protocol:
    """Sizes of one sweep; the defaults are the published sweep's (`scripts/sweep.py`).

    Attributes:
        n_envs, dim_inv, dim_spu: the problems' environments and input dimensions.
        n_per_env: training rows per environment.
        n_eval_per_env: validation rows and test rows per environment.
        steps: full-batch Adam steps per model.
        n_draws: hyperparameter draws per (example, method) (draw 0 = defaults).
        n_seeds: data seeds per draw.
        eiil_steps: Adam steps of EIIL's split (methods on inferred environments; the EIIL
            authors' release: 10,000).
    """

    n_envs: int = 3
    dim_inv: int = 5
    dim_spu: int = 5
    n_per_env: int = 10_000
    n_eval_per_env: int = 10_000
    steps: int = 10_000
    n_draws: int = 20
    n_seeds: int = 50
    eiil_steps: int = 10_000

    def __post_init__(self) -> None:
        for name in ("n_per_env", "n_eval_per_env", "steps", "n_draws", "n_seeds", "eiil_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"linear unit tests: {name} must be >= 1, got {getattr(self, name)}")


def objective_name(method: str) -> str:
    """The objective a method trains with (the oracle is ERM on the test distribution)."""
    if method not in all_methods():
        raise ConfigError(f"unknown method {method!r}; choose one of {list(all_methods())}")
    return OBJECTIVES.get(method, method)


def paper_irm_config(irm_lambda: float, lr: float, weight_decay: float) -> dict[str, Any]:
    """The `irm` run equal to the authors' Adam(lr, weight_decay) on (1 - l) R + l R_inv, l = irm_lambda.

    Their gradient is (1 - l) (grad R + l / (1 - l) grad R_inv + weight_decay / (1 - l) w); Adam
    divides out the factor (1 - l), so the weight is l / (1 - l) and the weight decay is scaled by
    1 / (1 - l).
    """
    if not 0.0 <= irm_lambda < 1.0:
        raise ConfigError(f"linear unit tests: irm_lambda must be in [0, 1), got {irm_lambda}")
    return {
        "lr": lr,
        "weight_decay": weight_decay / (1.0 - irm_lambda),
        "method_args": {"lambda": irm_lambda / (1.0 - irm_lambda), **PAPER_IRM_FIXED},
    }


def draw_config(method: str, draw: int, steps: int) -> dict[str, Any]:
    """Hyperparameter draw `draw` (0: the defaults) of `method` (see the module doc).

    Returns:
        {"lr", "weight_decay": what Adam gets, "method_args": the objective's arguments,
        "searched": the drawn values in the authors' terms (lr, wd, and irm_lambda for IRMv1)}.
    """
    name = objective_name(method)
    method = INFERRED.get(method, method)
    if draw == 0:
        searched = {"lr": OPTIMIZER_DEFAULTS["lr"], "wd": OPTIMIZER_DEFAULTS["weight_decay"],
                    "irm_lambda": PAPER_IRM_LAMBDA}
    else:
        searched = authors_draw(draw)
    if method == "irm":
        return {**paper_irm_config(searched["irm_lambda"], searched["lr"], searched["wd"]), "searched": searched}
    method_args = draw_hparams(
        name, draw, steps=steps, optimizer_defaults=OPTIMIZER_DEFAULTS, optimizer_search=OPTIMIZER_SEARCH
    )["method_args"]
    del searched["irm_lambda"]
    return {"lr": searched["lr"], "weight_decay": searched["wd"], "method_args": method_args, "searched": searched}


def authors_draw(model_seed: int) -> dict[str, float]:
    """The authors' random hyperparameters of model seed `model_seed`: {"lr", "wd", "irm_lambda"}."""
    rng = random.Random(model_seed + MODEL_SEED_OFFSET)
    lr = 10 ** rng.uniform(*OPTIMIZER_EXPONENTS["lr"])
    wd = 10 ** rng.uniform(*OPTIMIZER_EXPONENTS["weight_decay"])
    return {"lr": lr, "wd": wd, "irm_lambda": 1 - 10 ** rng.uniform(*PAPER_IRM_LAMBDA_EXPONENT)}


@dataclass
class Run:
    """One trained model: a (draw, data seed) of one example and method.

    Attributes:
        validation: [E] validation error per training environment.
        test: [E] test error per environment.
        trace: the objective's R_emp / R_inv / lambda over training (when traced).
        purity: for a method on inferred environments, the split's purity against the given ones.
    """

    draw: int
    seed: int
    config: dict[str, Any]
    validation: list[float]
    test: list[float]
    diverged: bool
    trace: list[dict[str, float]] = field(default_factory=list)
    purity: float | None = None


def run_one(
    example: str, method: str, draw: int, seed: int, protocol: Protocol, *, trace_every: int = 0
) -> Run:
    """Train and score one model through the objective classes (`linear.fit.fit_linear`)."""
    problem, train, validation, test = _splits(example, method, seed, protocol)
    config = draw_config(method, draw, protocol.steps)
    data, env_names, split_purity = LinearData.from_envs(train, problem.task), problem.env_names, None
    if method in INFERRED:
        inferred = _inferred_envs(example, seed, protocol)
        data, env_names, split_purity = inferred.data, INFERRED_ENVS, inferred.purity
    objective = build_objective(objective_name(method), env_names, config["method_args"])
    fit = fit_linear(
        objective,
        data,
        lr=config["lr"],
        weight_decay=config["weight_decay"],
        steps=protocol.steps,
        seed=draw,
        trace_every=trace_every,
    )
    return _scored(draw, seed, config, fit, problem.task, validation, test, split_purity)


def run_cell(
    example: str, method: str, draws: list[int], seeds: list[int], protocol: Protocol, *, trace_every: int = 0
) -> list[Run]:
    """Train and score every (draw, data seed) of one example and method, draw by draw.

    Methods whose objective has a batched form (`linear.batched.batched_objectives`) train all
    their models at once (`fit_linear_cell`), as `run_one` trains each of them up to float32
    rounding (tests/linear/test_batched.py); the others (named in a logged warning), and
    inferred splits that leave an environment empty, one by one (`run_one`).
    """
    one_by_one = [(d, s) for d in draws for s in seeds]
    if objective_name(method) not in batched_objectives():
        _say_one_at_a_time(method)
        return [run_one(example, method, d, s, protocol, trace_every=trace_every) for d, s in one_by_one]
    splits = [_splits(example, method, s, protocol) for s in seeds]
    problem = splits[0][0]
    purity: list[float | None] = [None] * len(seeds)
    if method in INFERRED:
        inferred = [_inferred_envs(example, s, protocol) for s in seeds]
        data, num_envs, purity = [i.data for i in inferred], len(INFERRED_ENVS), [i.purity for i in inferred]
    else:
        data, num_envs = [LinearData.from_envs(train, problem.task) for _, train, _, _ in splits], problem.n_envs
    if not all(bool((torch.bincount(d.env, minlength=num_envs) > 0).all()) for d in data):
        return [run_one(example, method, d, s, protocol, trace_every=trace_every) for d, s in one_by_one]
    configs = [draw_config(method, d, protocol.steps) for d in draws]
    fits = fit_linear_cell(objective_name(method), Cell.stack(data, num_envs), configs, steps=protocol.steps,
                           init_seeds=list(draws), trace_every=trace_every)
    return [
        _scored(d, s, config, fit, problem.task, validation, test, split_purity)
        for d, config, by_seed in zip(draws, configs, fits)
        for s, fit, (_, _, validation, test), split_purity in zip(seeds, by_seed, splits, purity)
    ]


@cache
def _say_one_at_a_time(method: str) -> None:
    """Log, once per process and method, that its objective has no batched form."""
    logger.warning("linear unit tests: %s (objective %r) has no batched form (Objective.batched); "
                   "its models train one at a time", method, objective_name(method))


def _splits(
    example: str, method: str, seed: int, protocol: Protocol
) -> tuple[LinearUnitTest, list[EnvSample], list[EnvSample], list[EnvSample]]:
    """The problem of one data seed and its training, validation and test rows (module doc)."""
    problem = make_unit_test(
        example,
        n_envs=protocol.n_envs,
        dim_inv=protocol.dim_inv,
        dim_spu=protocol.dim_spu,
        seed=seed,
    )
    fit_split: Literal["train", "test"] = "test" if method == ORACLE else "train"
    train = problem.sample(fit_split, protocol.n_per_env, stream=0)
    validation = problem.sample(fit_split, protocol.n_eval_per_env, stream=1)
    test = problem.sample("test", protocol.n_eval_per_env, stream=2)
    return problem, train, validation, test


def _scored(
    draw: int, seed: int, config: dict[str, Any], fit: LinearFit, task: Task,
    validation: list[EnvSample], test: list[EnvSample], purity: float | None,
) -> Run:
    """The `Run` of one trained model: its validation and test errors per environment."""
    return Run(
        draw=draw,
        seed=seed,
        config=config,
        validation=errors(fit.weights, validation, task),
        test=errors(fit.weights, test, task),
        diverged=fit.diverged,
        trace=fit.trace,
        purity=purity,
    )


@lru_cache(maxsize=64)
def _inferred_envs(example: str, seed: int, protocol: Protocol) -> InferredEnvs:
    """EIIL's split of one (example, data seed)'s training rows, shared by every draw (in this process)."""
    problem = make_unit_test(
        example, n_envs=protocol.n_envs, dim_inv=protocol.dim_inv, dim_spu=protocol.dim_spu, seed=seed
    )
    train = problem.sample("train", protocol.n_per_env, stream=0)
    return eiil_environments(train, problem.task, steps=protocol.steps, eiil_steps=protocol.eiil_steps, seed=seed)


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
        seeds, per_seed: the data seeds and each one's test error averaged over environments.
    """

    draw: int
    config: dict[str, Any]
    mean: float
    std: float
    per_env: list[float]
    validation: float
    diverged: int
    seeds: list[int] = field(default_factory=list)
    per_seed: list[float] = field(default_factory=list)


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
        seeds=[r.seed for r in chosen],
        per_seed=test.mean(1).tolist(),
    )
