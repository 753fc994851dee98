"""GroupDRO: minimise a worst-case-leaning mixture of environment risks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import INVARIANCE, Hyperparameters, LossParts, Objective, hparam
from robustvlm.objectives.env_stats import reduce_env_stats
from robustvlm.objectives.invariance import require
from robustvlm.objectives.linear_cell import BatchedLoss, Cell, Losses


@dataclass(frozen=True)
class GroupDROHyperparameters(Hyperparameters):
    eta: float = hparam(1e-2, ("log", 1e-3, 1e-1), "step size of the weight update")


class BatchedGroupDRO(BatchedLoss[GroupDROHyperparameters]):
    """GroupDRO's batched form (`objectives.linear_cell`): q's exponentiated-gradient update,
    one q per model, then sum_e q_e R^e."""

    def __init__(self, hps: list[GroupDROHyperparameters], cell: Cell) -> None:
        super().__init__(hps, cell)
        self.eta = self.per_draw("eta")[..., None]  # [1, D, 1]
        self.q = torch.full((*self.shape, self.num_envs), 1.0 / self.num_envs, dtype=torch.float64)

    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        risks = self.env_risks(f, y)
        self.q = torch.softmax(self.q.log() + self.eta * risks.detach().double(), dim=2)
        loss = ((self.q / self.q.sum(2, keepdim=True)).to(risks.dtype) * risks).sum(2)
        return loss, risks.mean(2), None, None


class GroupDRO(Objective[GroupDROHyperparameters]):
    """GroupDRO (Sagawa et al.; DomainBed's update): loss = sum_e q_e R^e.

    Each call first updates the environment weights by exponentiated gradient,
    q_e <- q_e exp(eta R^e) / Z (environments absent from the batch keep their factor 1),
    then weighs the present environments' risks by q renormalised over them. q starts
    uniform, is checkpointed by `state_dict` and logged as extras `q/<env>`. The logged
    R_emp is the mean of the environment risks present in the batch.
    """

    name = "groupdro"
    hparams_class = GroupDROHyperparameters
    label = "GroupDRO"
    colour = "C5"
    applies_to = frozenset({INVARIANCE})
    batched = BatchedGroupDRO

    @classmethod
    def penalty_schedule(cls, anneal: int, weight: float) -> dict[str, Any] | None:
        """None: GroupDRO reweights environments and has no penalty weight to anneal."""
        return None

    def __init__(self, env_names: list[str], **hparams: Any):
        super().__init__(env_names, **hparams)
        require(self.hp.eta >= 0, self.name, "eta must be >= 0")
        self.q = torch.full((len(self.env_names),), 1.0 / len(self.env_names), dtype=torch.float64)

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        risks, _ = reduce_env_stats(out, len(self.env_names))
        present = risks.present.cpu()
        exponent = self.hp.eta * risks.risks.detach().cpu().double() * present
        self.q = torch.softmax(self.q.log() + exponent, dim=0)
        weights = self.q[present] / self.q[present].sum()
        loss = (weights.to(risks.risks) * risks.risks[risks.present]).sum()
        return LossParts(
            loss=loss,
            risk=float(risks.empirical_risk().detach()),
            env_risks=risks.named(self.env_names),
            extras={f"q/{name}": float(q) for name, q in zip(self.env_names, self.q)},
        )

    def state_dict(self) -> dict[str, Any]:
        """{"q": environment weights}."""
        return {"q": self.q.tolist()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the environment weights."""
        require(
            len(state["q"]) == len(self.env_names),
            self.name,
            f"checkpoint holds {len(state['q'])} environment weights, expected {len(self.env_names)}",
        )
        self.q = torch.tensor(state["q"], dtype=torch.float64)
