"""Shared pieces of the penalised objectives: the annealed weight and the loss assembly.

Loss = R_emp + lambda * R_inv, where R_emp is the mean of the risks of the environments
present in the (global) batch and R_inv the method's invariance penalty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from robustvlm.errors import ConfigError
from robustvlm.objectives.base import Hyperparameters, LossParts, Objective, field_name, hparam
from robustvlm.objectives.env_stats import EnvRisks


def weight_after(default: float) -> Any:
    """`lambda`: the penalty weight from `anneal_steps` on (an `hparam` field)."""
    return hparam(default, ("log", 1e-1, 1e5), "penalty weight from step `anneal_steps` on")


def weight_before(default: float) -> Any:
    """`lambda_before`: the penalty weight before `anneal_steps` (an `hparam` field)."""
    return hparam(default, None, "penalty weight before `anneal_steps`")


def anneal_period(default: int) -> Any:
    """`anneal_steps`: the steps before the switch (an `hparam` field)."""
    return hparam(default, ("int_log", 1, 10_000), "steps before the switch")


def reset_at_anneal(default: bool) -> Any:
    """`reset_optimizer_at_anneal` (an `hparam` field)."""
    return hparam(default, None, "re-create the optimizer at the switch (its moments are stale)")


@dataclass(frozen=True)
class AnnealedHyperparameters(Hyperparameters):
    """A penalty weight that switches value after an anneal period. The defaults are IRMv1's
    (DomainBed's schedule); an objective with others declares those fields again (their order
    stays)."""

    lambda_: float = weight_after(1e2)
    lambda_before: float = weight_before(1.0)
    anneal_steps: int = anneal_period(500)
    reset_optimizer_at_anneal: bool = reset_at_anneal(True)


A = TypeVar("A", bound=AnnealedHyperparameters)


def require(condition: bool, method: str, message: str) -> None:
    """Raise ConfigError naming the method when a hyperparameter is invalid."""
    if not condition:
        raise ConfigError(f"method '{method}': {message}")


class AnnealedObjective(Objective[A]):
    """An objective whose penalty weight is `lambda_before` until `anneal_steps`, then `lambda`.

    As in DomainBed, the optimizer may be re-created at the switch (`resets_optimizer_at`).
    """

    def __init__(self, env_names: list[str], **hparams: Any):
        super().__init__(env_names, **hparams)
        require(self.hp.anneal_steps >= 0, self.name, "anneal_steps must be >= 0")
        for key in ("lambda", "lambda_before"):  # a negative weight rewards variance across envs
            weight = getattr(self.hp, field_name(key))
            require(weight >= 0, self.name, f"{key} must be >= 0, not {weight!r}")

    def penalty_weight(self, step: int) -> float:
        """lambda at this step (0-based)."""
        return float(self.hp.lambda_ if step >= self.hp.anneal_steps else self.hp.lambda_before)

    def resets_optimizer_at(self, step: int) -> bool:
        """True at the switch step when `reset_optimizer_at_anneal` is set."""
        return bool(self.hp.reset_optimizer_at_anneal) and step == self.hp.anneal_steps > 0


def penalised_parts(
    risks: EnvRisks,
    penalty: torch.Tensor,
    weight: float,
    env_names: list[str],
    extras: dict[str, float] | None = None,
) -> LossParts:
    """LossParts for loss = R_emp + weight * penalty (weight a constant, no gradient).

    With weight 0 the penalty stays out of the graph, so its backward costs nothing.
    """
    r_emp = risks.empirical_risk()
    return LossParts(
        loss=r_emp + weight * penalty if weight else r_emp,
        risk=float(r_emp.detach()),
        penalty=float(penalty.detach()),
        weight=weight,
        env_risks=risks.named(env_names),
        extras=extras or {},
    )
