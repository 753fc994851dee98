"""V-REx: the variance of the environment risks."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import INVARIANCE, LADDER, LossParts
from robustvlm.objectives.env_stats import reduce_env_stats
from robustvlm.objectives.invariance import (
    AnnealedHyperparameters,
    AnnealedObjective,
    penalised_parts,
    weight_after,
)
from robustvlm.objectives.linear_cell import AnnealedBatchedLoss


@dataclass(frozen=True)
class VRExHyperparameters(AnnealedHyperparameters):
    """IRMv1's anneal schedule (DomainBed's) with a weight of 10 after it."""

    lambda_: float = weight_after(1e1)


class BatchedVREx(AnnealedBatchedLoss[VRExHyperparameters]):
    """V-REx's batched form (`objectives.linear_cell`): R_inv = Var_e R^e."""

    def penalty(self, f: torch.Tensor, y: torch.Tensor, risks: torch.Tensor, step: int) -> torch.Tensor:
        return (risks - risks.mean(2, keepdim=True)).square().mean(2)


class VREx(AnnealedObjective[VRExHyperparameters]):
    """V-REx (Krueger et al.; DomainBed's schedule): R_emp + lambda * Var_e(R^e).

    The variance is the population variance over the environments present in the batch
    (0 when only one is present); R_emp is the mean of those environment risks.
    """

    name = "vrex"
    hparams_class = VRExHyperparameters
    label = "V-REx"
    colour = "C2"
    applies_to = frozenset({LADDER, INVARIANCE})
    batched = BatchedVREx

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        risks, _ = reduce_env_stats(out, len(self.env_names))
        present = risks.risks[risks.present]
        penalty = (present - present.mean()).square().mean()
        return penalised_parts(risks, penalty, self.penalty_weight(step), self.env_names)
