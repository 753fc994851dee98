"""IRMv1: the squared gradient of each environment's risk w.r.t. a dummy scale on the logits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from robustvlm.errors import ConfigError
from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import INVARIANCE, LADDER, LossParts, hparam
from robustvlm.objectives.env_stats import (
    check_env_ids,
    group_count,
    group_sum,
    reduce_env_stats,
    split_examples_in_halves,
    stats_dtype,
)
from robustvlm.objectives.invariance import (
    AnnealedHyperparameters,
    AnnealedObjective,
    penalised_parts,
    require,
)
from robustvlm.objectives.linear_cell import AnnealedBatchedLoss, Cell, scale_grad, shift_grad
from robustvlm.objectives.scale_grad import risk_and_scale_grads, shift_grads


@dataclass(frozen=True)
class IRMHyperparameters(AnnealedHyperparameters):
    """The anneal fields with their defaults, then IRMv1's penalty's."""

    penalty_reduction: str = hparam("mean", ("choice", "mean", "sum"), "over environments")
    unbiased: bool = hparam(True, ("choice", True, False), "product of two halves' gradients")
    shift_dummy: bool = hparam(False, None, "also penalise a shift dummy on the last logit")


class BatchedIRM(AnnealedBatchedLoss[IRMHyperparameters]):
    """IRMv1's batched form (`objectives.linear_cell`): each environment's squared mean scale
    gradient (plus its shift gradient's with `shift_dummy`), summed or averaged; the biased
    penalty only."""

    def __init__(self, hps: list[IRMHyperparameters], cell: Cell) -> None:
        super().__init__(hps, cell)
        if any(hp.unbiased for hp in hps):
            raise ConfigError("batched irm: the unbiased (two-halves) penalty has no batched form")
        self.shift = torch.tensor([[bool(hp.shift_dummy) for hp in hps]])
        self.mean = torch.tensor([[hp.penalty_reduction == "mean" for hp in hps]])

    def penalty(self, f: torch.Tensor, y: torch.Tensor, risks: torch.Tensor, step: int) -> torch.Tensor:
        per_env = self.cell.env_mean(scale_grad(f, y, self.task)).square()  # [S, D, E]
        shift = self.cell.env_mean(shift_grad(f, y, self.task)).square()
        per_env = per_env + torch.where(self.shift[..., None], shift, 0.0)
        return torch.where(self.mean, per_env.mean(2), per_env.sum(2))


class IRM(AnnealedObjective[IRMHyperparameters]):
    """IRMv1 (Arjovsky et al.; DomainBed's schedule): R_emp + lambda * R_inv.

    R_inv over the environments present: the square of dR^e/dw at w = 1, where R^e is the
    mean token risk (cross-entropy, or squared error) of environment e with its logits (or
    predictions) scaled by w; summed or
    averaged over environments (`penalty_reduction`). With `unbiased`, the square is
    replaced by the product of the gradients of the two halves of the environment's
    *examples* (alternate examples; all tokens of an example stay in one half), an unbiased
    estimate of the squared gradient; an environment with one example falls back to the
    square. With `shift_dummy`, each environment's term also adds the square of dR^e/db at
    b = 0 for a shift b on the last logit (`scale_grad.shift_grads`; the linear unit tests'
    authors penalise both dummies). R_emp is the mean of the environment risks present in the batch.
    """

    name = "irm"
    hparams_class = IRMHyperparameters
    label = "IRMv1"
    colour = "C1"
    applies_to = frozenset({LADDER, INVARIANCE})
    batched = BatchedIRM

    @classmethod
    def penalty_schedule(cls, anneal: int, weight: float) -> dict[str, Any] | None:
        """The annealed schedule with the paper's IRMv1 penalty: the plain mean over environments
        of the squared gradient."""
        schedule = super().penalty_schedule(anneal, weight)
        return None if schedule is None else {**schedule, "unbiased": False, "penalty_reduction": "mean"}

    def __init__(self, env_names: list[str], **hparams: Any):
        super().__init__(env_names, **hparams)
        require(
            self.hp.penalty_reduction in ("mean", "sum"),
            self.name,
            f"penalty_reduction must be 'mean' or 'sum', got {self.hp.penalty_reduction!r}",
        )

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        num_envs = len(self.env_names)
        check_env_ids(out.env, num_envs)
        no_draws = torch.empty(
            out.logits.shape[0], 0, dtype=stats_dtype(out), device=out.logits.device
        )
        risk, grads = risk_and_scale_grads(out, no_draws)
        grads = grads[:, 0:1]  # [N, 1] d risk/dw at w = 1
        if self.hp.shift_dummy:
            grads = torch.cat([grads, shift_grads(out).to(grads.dtype)[:, None]], dim=1)  # and d/db
        dummies = grads.shape[1]
        if self.hp.unbiased:
            half, examples = split_examples_in_halves(out, num_envs)
        else:
            half, examples = torch.zeros_like(out.env), None
        cell = out.env * 2 + half  # (environment, half) of each token
        risks, (grad_sum, token_count) = reduce_env_stats(
            out,
            num_envs,
            group_sum(grads, cell, 2 * num_envs),
            group_count(cell, 2 * num_envs, grads.dtype),
            token_risk=risk,
        )
        grad_sum, token_count = grad_sum.view(num_envs, 2, dummies), token_count.view(num_envs, 2, 1)
        env_grad = grad_sum.sum(1) / token_count.sum(1).clamp(min=1)  # [E, dummies] dR^e/dw (, dR^e/db)
        per_env = env_grad.square().sum(1)
        if examples is not None:
            half_grad = grad_sum / token_count.clamp(min=1)
            halves = (half_grad[:, 0] * half_grad[:, 1]).sum(1)
            per_env = torch.where(examples >= 2, halves, per_env)
        per_env = per_env[risks.present]
        penalty = per_env.mean() if self.hp.penalty_reduction == "mean" else per_env.sum()
        return penalised_parts(risks, penalty, self.penalty_weight(step), self.env_names)
