"""Empirical risk minimisation: mean token risk over all answer tokens."""

from __future__ import annotations

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import EVERY_EXPERIMENT, Hyperparameters, LossParts, Objective


class ERM(Objective[Hyperparameters]):
    """Token-mean risk over the answer tokens of the batch.

    With cross-entropy (`AnswerOutputs.risk == "ce"`) this is the `labels=` loss of the model;
    with squared error, the mean squared error.
    """

    name = "erm"
    label = "ERM"
    colour = "C0"
    applies_to = EVERY_EXPERIMENT

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        risk = out.token_risk()
        loss = risk.mean()
        env_risks = {}
        for i, name in enumerate(self.env_names):
            mask = out.env == i
            if mask.any():
                env_risks[name] = float(risk[mask].mean().detach())
        return LossParts(loss=loss, risk=float(loss.detach()), env_risks=env_risks)
