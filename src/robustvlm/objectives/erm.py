"""Empirical risk minimisation: mean token risk over all answer tokens."""

from __future__ import annotations

import torch

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import EVERY_EXPERIMENT, Hyperparameters, LossParts, Objective
from robustvlm.objectives.linear_cell import BatchedLoss, Losses, row_risk


class BatchedERM(BatchedLoss[Hyperparameters]):
    """ERM's batched form (`objectives.linear_cell`): the mean risk over all rows."""

    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        r_emp = row_risk(f, y, self.task).mean(2)  # the mean over rows, as `ERM` takes it
        return r_emp, r_emp, None, None


class ERM(Objective[Hyperparameters]):
    """Token-mean risk over the answer tokens of the batch.

    With cross-entropy (`AnswerOutputs.risk == "ce"`) this is the `labels=` loss of the model;
    with squared error, the mean squared error.
    """

    name = "erm"
    label = "ERM"
    colour = "C0"
    applies_to = EVERY_EXPERIMENT
    batched = BatchedERM

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        risk = out.token_risk()
        loss = risk.mean()
        env_risks = {}
        for i, name in enumerate(self.env_names):
            mask = out.env == i
            if mask.any():
                env_risks[name] = float(risk[mask].mean().detach())
        return LossParts(loss=loss, risk=float(loss.detach()), env_risks=env_risks)
