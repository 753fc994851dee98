"""Dynamic BIRM: BIRM's penalty with a weight that tracks a target share of the risk."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch

from robustvlm.errors import ConfigError
from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import EVERY_EXPERIMENT, LossParts, Objective, hparam
from robustvlm.objectives.birm import (
    BatchedBayesianPenalty,
    BayesianScalePenalty,
    ScaleHyperparameters,
)
from robustvlm.objectives.invariance import penalised_parts, require
from robustvlm.objectives.linear_cell import BatchedLoss, Cell, Losses

SMOOTH = ("lambda", "risks")
"""`LambdaController.smooth`: what the controller averages over steps."""


@dataclass
class LambdaController:
    """The adaptive penalty weight of Dynamic BIRM: one update per optimizer step.

    lambda_t = 0 while step < k_skip; afterwards
        P_target      = max(gamma * R_emp, p_min)
        lambda_target = P_target / max(R_inv, eps, eps_rel * R_inv_ref)
        lambda_t      = alpha * lambda_{t-1} + (1 - alpha) * lambda_target,
    then clipped to `lambda_max` when set (the clipped value is what is carried on).
    `smooth="lambda"` (the paper's) forms lambda_target from the step's own R_emp and R_inv;
    `smooth="risks"` from their running means over the penalised steps,
        R_bar_t = alpha * R_bar_{t-1} + (1 - alpha) * R_t   (R_bar at the first penalised step: its R),
    for R_emp and R_inv alike, then the same recurrence. On mini-batches R_inv is sampling noise
    spread over decades, and the mean of P_target / R_inv is dominated by the batches where R_inv
    happens to be smallest (the mean of 1 / X is above 1 / mean of X); averaging R_inv before the
    ratio makes lambda_t * mean(R_inv) track P_target instead.
    R_inv_ref is R_inv at the first penalised step, so with eps_rel > 0 lambda_target is at
    most 1 / eps_rel times its first value (times P_target's change): a floor in R_inv's own
    units, whatever the vocabulary or risk. eps_rel = 0 is the paper's controller.
    `step` is the optimizer step: with gradient accumulation the first micro-batch of a step
    updates lambda from its own R_emp and R_inv, and the step's other micro-batches reuse that
    lambda, so `alpha` and `k_skip` count the same steps.

    Attributes:
        value: lambda of the last update (lambda_{t-1} for the next step).
        step: the optimizer step of the last update (None before the first).
        target, capped: that update's lambda_target and whether the cap bound.
        r_inv_ref: R_inv at the first penalised step (None before it).
        r_emp_bar, r_inv_bar: the running means of `smooth="risks"` (None before the first
            penalised step, and with `smooth="lambda"`).
    """

    gamma: float
    alpha: float
    p_min: float
    k_skip: int
    eps: float
    lambda_max: float | None
    eps_rel: float = 0.0
    smooth: str = "lambda"
    value: float = 0.0
    step: int | None = None
    target: float = 0.0
    capped: bool = False
    r_inv_ref: float | None = None
    r_emp_bar: float | None = None
    r_inv_bar: float | None = None

    def update(self, step: int, r_emp: float, r_inv: float) -> tuple[float, float, bool]:
        """lambda of optimizer step `step`: (lambda_t, lambda_target, whether the cap bound).

        The first call of a step advances the recurrence; later calls with the same step
        return the same values and change nothing.
        """
        if step < self.k_skip:
            return 0.0, 0.0, False
        if step != self.step:
            if self.r_inv_ref is None:
                self.r_inv_ref = r_inv
            if self.smooth == "risks":
                r_emp, r_inv = self._running_means(r_emp, r_inv)
            floor = max(self.eps, self.eps_rel * self.r_inv_ref)
            target = max(self.gamma * r_emp, self.p_min) / max(r_inv, floor)
            value = self.alpha * self.value + (1.0 - self.alpha) * target
            self.capped = self.lambda_max is not None and value > self.lambda_max
            self.value = min(value, cast(float, self.lambda_max)) if self.capped else value  # capped: not None
            self.step, self.target = step, target
        return self.value, self.target, self.capped

    def _running_means(self, r_emp: float, r_inv: float) -> tuple[float, float]:
        """(R_emp_bar, R_inv_bar) after this step's R_emp and R_inv (`smooth="risks"`)."""
        if self.r_emp_bar is None or self.r_inv_bar is None:
            self.r_emp_bar, self.r_inv_bar = r_emp, r_inv
        else:
            self.r_emp_bar = self.alpha * self.r_emp_bar + (1.0 - self.alpha) * r_emp
            self.r_inv_bar = self.alpha * self.r_inv_bar + (1.0 - self.alpha) * r_inv
        return self.r_emp_bar, self.r_inv_bar

    def state_dict(self) -> dict[str, Any]:
        """{"lambda", "lambda_step", "lambda_target", "lambda_capped"} of the last update,
        "r_inv_ref", "r_emp_bar", "r_inv_bar"."""
        return {
            "lambda": self.value,
            "lambda_step": self.step,
            "lambda_target": self.target,
            "lambda_capped": self.capped,
            "r_inv_ref": self.r_inv_ref,
            "r_emp_bar": self.r_emp_bar,
            "r_inv_bar": self.r_inv_bar,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the last update (checkpoints written before per-step updates hold "lambda" only)."""
        self.value = float(state["lambda"])
        self.step = state.get("lambda_step")
        self.target = float(state.get("lambda_target", 0.0))
        self.capped = bool(state.get("lambda_capped", False))
        self.r_inv_ref = state.get("r_inv_ref")
        self.r_emp_bar, self.r_inv_bar = state.get("r_emp_bar"), state.get("r_inv_bar")


@dataclass(frozen=True)
class DynamicBIRMHyperparameters(ScaleHyperparameters):
    """The Bayesian penalty's fields first, then the controller's (`LambdaController`)."""

    gamma: float = hparam(0.15, ("log", 0.01, 1.0), "target ratio of penalty to empirical risk")
    alpha: float = hparam(0.8, ("uniform", 0.5, 0.99), "smoothing of lambda (weight of the past)")
    p_min: float = hparam(0.05, ("log", 1e-3, 0.5), "floor of the target penalty")
    k_skip: int = hparam(200, ("int_log", 1, 2000), "steps with lambda = 0 (warm-up)")
    eps: float = hparam(1e-8, None, "floor of R_inv in lambda_target = P_target / R_inv")
    lambda_max: float | None = hparam(None, None, "cap on lambda (None: no cap); logged when it binds")
    eps_rel: float = hparam(
        0.1, None, "floor of R_inv relative to R_inv at the first penalised step (0: none)"
    )
    smooth: str = hparam(
        "lambda", None, "what the controller averages over steps: lambda_target (`lambda`, the "
        "paper's) or R_emp and R_inv before their ratio (`risks`)"
    )


class BatchedDynamicBIRM(BatchedLoss[DynamicBIRMHyperparameters]):
    """Dynamic BIRM's batched form (`objectives.linear_cell`): `LambdaController`, one per model,
    as [S, D] float64 tensors, with `BatchedBayesianPenalty` as R_inv; the paper's controller
    only (smooth: lambda)."""

    def __init__(self, hps: list[DynamicBIRMHyperparameters], cell: Cell) -> None:
        if any(hp.smooth != "lambda" for hp in hps):
            raise ConfigError("method 'dynamic_birm': the batched linear trainer runs the paper's controller "
                              "only (smooth: lambda); train smooth: risks one model at a time")
        super().__init__(hps, cell)
        self.bayes = BatchedBayesianPenalty(hps, cell)
        self.k_skip = [int(hp.k_skip) for hp in hps]
        self.gamma, self.alpha, self.p_min = self.per_draw("gamma"), self.per_draw("alpha"), self.per_draw("p_min")
        self.eps, self.eps_rel, self.cap = self.per_draw("eps"), self.per_draw("eps_rel"), self.per_draw("lambda_max")
        self.value = torch.zeros(self.shape, dtype=torch.float64)
        self.ref = torch.full(self.shape, math.nan, dtype=torch.float64)

    def update(self, step: int, r_emp: torch.Tensor, r_inv: torch.Tensor) -> torch.Tensor:
        """[S, D] lambda_t from detached R_emp and R_inv [S, D] (0 while step < k_skip)."""
        on = torch.tensor([[step >= k for k in self.k_skip]]).expand(self.shape)
        r_emp, r_inv = r_emp.double(), r_inv.double()
        self.ref = torch.where(on & self.ref.isnan(), r_inv, self.ref)
        floor = torch.maximum(self.eps, self.eps_rel * self.ref)
        target = torch.maximum(self.gamma * r_emp, self.p_min) / torch.maximum(r_inv, floor)
        value = self.alpha * self.value + (1.0 - self.alpha) * target
        value = torch.where(self.cap.isnan() | (value <= self.cap), value, self.cap)
        self.value = torch.where(on, value, self.value)
        return torch.where(on, self.value, 0.0)

    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        risks = self.env_risks(f, y)
        r_emp = risks.mean(2)
        penalty = self.bayes(f, y, step)
        weight = self.update(step, r_emp.detach(), penalty.detach())
        return self.penalised(r_emp, penalty, weight)


class DynamicBIRM(Objective[DynamicBIRMHyperparameters]):
    """Dynamic BIRM: R_emp + lambda_t * R_inv with R_inv of BIRM and lambda_t of LambdaController.

    R_emp is the mean of the environment risks present in the batch. lambda_t is a number
    computed from detached R_emp and R_inv (no gradient flows through it). Logged extras:
    `lambda_target` and `lambda_capped` (1 when `lambda_max` bound at this step, else 0).
    The controller state and the draw counter are in `state_dict`, so resuming is exact.
    The controller advances once per optimizer step (`step`); with gradient accumulation the
    micro-batches of one step share its lambda. The penalty draws fresh scales every call.

    Defaults: the paper's gamma 0.15, alpha 0.8, p_min 0.05 and k_skip 200, plus eps_rel 0.1
    (not in the paper; `eps_rel=0` restores its controller). Measured without the floor
    (README, "Dynamic BIRM defaults"): on the built-in `spurious` benchmark (tiny Idefics3,
    800 steps) lambda climbed to 4.5e5 as R_inv fell to 1e-7 and the model took the
    anti-colour rule; in the linear unit tests' random search 24 of 60 runs reached lambda
    >= 1e4 (up to 4.6e6) and 11 collapsed to a constant prediction (risk ln 2), the default
    draw on Example3s among them. A fixed `lambda_max` does not fit every problem: runs that
    did not collapse reached lambda 25 (Example2) but 4e5 (Example1, a regression), and a cap
    of 100 still collapsed Example3. With eps_rel 0.1 lambda stayed at or below 4.2 on
    `spurious` (the model kept ERM's colour rule) and at or below 41 in the collapsed draws.
    """

    name = "dynamic_birm"
    hparams_class = DynamicBIRMHyperparameters
    label = "Dynamic BIRM"
    colour = "C4"
    applies_to = EVERY_EXPERIMENT
    batched = BatchedDynamicBIRM

    @classmethod
    def penalty_schedule(cls, anneal: int, weight: float) -> dict[str, Any] | None:
        """lambda is set by its controller: the penalty stays off for the `anneal` warm-up steps."""
        return {"k_skip": anneal}

    def __init__(self, env_names: list[str], **hparams: Any):
        super().__init__(env_names, **hparams)
        hp = self.hp
        require(0.0 <= hp.alpha < 1.0, self.name, "alpha must be in [0, 1)")
        require(hp.gamma >= 0, self.name, "gamma (the penalty weight's target ratio) must be >= 0")
        require(hp.p_min >= 0, self.name, "p_min must be >= 0")
        require(hp.eps > 0, self.name, "eps must be > 0")
        require(hp.k_skip >= 0, self.name, "k_skip must be >= 0")
        require(0.0 <= hp.eps_rel < 1.0, self.name, "eps_rel must be in [0, 1)")
        require(hp.smooth in SMOOTH, self.name, f"smooth must be one of {list(SMOOTH)}, not {hp.smooth!r}")
        require(
            hp.lambda_max is None or hp.lambda_max > 0, self.name, "lambda_max must be > 0"
        )
        self.penalty = BayesianScalePenalty(self.name, len(self.env_names), hp)
        self.controller = LambdaController(
            gamma=float(hp.gamma),
            alpha=float(hp.alpha),
            p_min=float(hp.p_min),
            k_skip=int(hp.k_skip),
            eps=float(hp.eps),
            lambda_max=None if hp.lambda_max is None else float(hp.lambda_max),
            eps_rel=float(hp.eps_rel),
            smooth=str(hp.smooth),
        )

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        risks, penalty = self.penalty(out)
        weight, target, capped = self.controller.update(
            step, float(risks.empirical_risk().detach()), float(penalty.detach())
        )
        extras = {"lambda_target": target, "lambda_capped": float(capped)}
        return penalised_parts(risks, penalty, weight, self.env_names, extras)

    def state_dict(self) -> dict[str, Any]:
        """The controller's last update (`LambdaController.state_dict`) and "calls" (draws made)."""
        return {**self.controller.state_dict(), **self.penalty.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.controller.load_state_dict(state)
        self.penalty.load_state_dict(state)
