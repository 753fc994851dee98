"""Empirical risk minimisation: mean cross-entropy over all answer tokens."""

from __future__ import annotations

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import LossParts, Objective


class ERM(Objective):
    """Token-mean cross-entropy over the answer tokens of the batch (the `labels=` loss)."""

    name = "erm"
    hparams = {}

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        ce = out.token_ce()
        loss = ce.mean()
        env_risks = {}
        for i, name in enumerate(self.env_names):
            mask = out.env == i
            if mask.any():
                env_risks[name] = float(ce[mask].mean().detach())
        return LossParts(loss=loss, risk=float(loss.detach()), env_risks=env_risks)
