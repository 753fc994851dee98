"""Dynamic BIRM: BIRM's penalty with a weight that tracks a target share of the risk."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import HParam, LossParts, Objective
from robustvlm.objectives.birm import SCALE_HPARAMS, BayesianScalePenalty
from robustvlm.objectives.invariance import penalised_parts, require


@dataclass
class LambdaController:
    """The adaptive penalty weight of Dynamic BIRM: one update per optimizer step.

    lambda_t = 0 while step < k_skip; afterwards
        P_target      = max(gamma * R_emp, p_min)
        lambda_target = P_target / max(R_inv, eps)
        lambda_t      = alpha * lambda_{t-1} + (1 - alpha) * lambda_target,
    then clipped to `lambda_max` when set (the clipped value is what is carried on).
    `step` is the optimizer step: with gradient accumulation the first micro-batch of a step
    updates lambda from its own R_emp and R_inv, and the step's other micro-batches reuse that
    lambda, so `alpha` and `k_skip` count the same steps.

    Attributes:
        value: lambda of the last update (lambda_{t-1} for the next step).
        step: the optimizer step of the last update (None before the first).
        target, capped: that update's lambda_target and whether the cap bound.
    """

    gamma: float
    alpha: float
    p_min: float
    k_skip: int
    eps: float
    lambda_max: float | None
    value: float = 0.0
    step: int | None = None
    target: float = 0.0
    capped: bool = False

    def update(self, step: int, r_emp: float, r_inv: float) -> tuple[float, float, bool]:
        """lambda of optimizer step `step`: (lambda_t, lambda_target, whether the cap bound).

        The first call of a step advances the recurrence; later calls with the same step
        return the same values and change nothing.
        """
        if step < self.k_skip:
            return 0.0, 0.0, False
        if step != self.step:
            target = max(self.gamma * r_emp, self.p_min) / max(r_inv, self.eps)
            value = self.alpha * self.value + (1.0 - self.alpha) * target
            self.capped = self.lambda_max is not None and value > self.lambda_max
            self.value = min(value, self.lambda_max) if self.capped else value
            self.step, self.target = step, target
        return self.value, self.target, self.capped

    def state_dict(self) -> dict[str, Any]:
        """{"lambda", "lambda_step", "lambda_target", "lambda_capped"}: the last update."""
        return {
            "lambda": self.value,
            "lambda_step": self.step,
            "lambda_target": self.target,
            "lambda_capped": self.capped,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the last update (checkpoints written before per-step updates hold "lambda" only)."""
        self.value = float(state["lambda"])
        self.step = state.get("lambda_step")
        self.target = float(state.get("lambda_target", 0.0))
        self.capped = bool(state.get("lambda_capped", False))


class DynamicBIRM(Objective):
    """Dynamic BIRM: R_emp + lambda_t * R_inv with R_inv of BIRM and lambda_t of LambdaController.

    R_emp is the mean of the environment risks present in the batch. lambda_t is a number
    computed from detached R_emp and R_inv (no gradient flows through it). Logged extras:
    `lambda_target` and `lambda_capped` (1 when `lambda_max` bound at this step, else 0).
    The controller state and the draw counter are in `state_dict`, so resuming is exact.
    The controller advances once per optimizer step (`step`); with gradient accumulation the
    micro-batches of one step share its lambda. The penalty draws fresh scales every call.
    """

    name = "dynamic_birm"
    hparams = {
        **SCALE_HPARAMS,
        "gamma": HParam(0.15, ("log", 0.01, 1.0), "target ratio of penalty to empirical risk"),
        "alpha": HParam(0.8, ("uniform", 0.5, 0.99), "smoothing of lambda (weight of the past)"),
        "p_min": HParam(0.05, ("log", 1e-3, 0.5), "floor of the target penalty"),
        "k_skip": HParam(200, ("int_log", 1, 2000), "steps with lambda = 0 (warm-up)"),
        "eps": HParam(1e-8, None, "floor of R_inv in lambda_target = P_target / R_inv"),
        "lambda_max": HParam(None, None, "cap on lambda (None: no cap); logged when it binds"),
    }

    def __init__(self, env_names: list[str], **hparams: Any):
        super().__init__(env_names, **hparams)
        hp = self.hp
        require(0.0 <= hp["alpha"] < 1.0, self.name, "alpha must be in [0, 1)")
        require(hp["eps"] > 0, self.name, "eps must be > 0")
        require(hp["k_skip"] >= 0, self.name, "k_skip must be >= 0")
        require(
            hp["lambda_max"] is None or hp["lambda_max"] > 0, self.name, "lambda_max must be > 0"
        )
        self.penalty = BayesianScalePenalty(self.name, len(self.env_names), hp)
        self.controller = LambdaController(
            gamma=float(hp["gamma"]),
            alpha=float(hp["alpha"]),
            p_min=float(hp["p_min"]),
            k_skip=int(hp["k_skip"]),
            eps=float(hp["eps"]),
            lambda_max=None if hp["lambda_max"] is None else float(hp["lambda_max"]),
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
