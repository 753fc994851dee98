"""The batched form of an objective: its loss for many one-output linear models at once.

The linear unit tests train the R = draws x seeds models of a cell together (`linear.batched`):
outputs f = W X^T [S, D, N] (S data seeds, D draws, N rows) and environment means as products
with [S, N, E] averaging weights. An objective that can be computed this way declares its
batched form (`Objective.batched`, a `BatchedLoss` subclass, beside the objective in its own
module); this module holds the cell and the row math they share:

- risk of a row: logistic loss of f (cross-entropy of the logits [0, f]) or (f - y)^2;
- d risk / d s at a scale s = 1 on f: (sigmoid(f) - y) f, or 2 (f - y) f; d risk / d b for a
  shift b: sigmoid(f) - y, or 2 (f - y) (IRMv1's and BIRM's dummies).

Each form computes, in closed form, what its objective class computes from a linear model's
`AnswerOutputs` (tests/linear/test_batched.py checks every registered form against
`linear.fit.fit_linear`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import torch
import torch.nn.functional as F

from robustvlm.data.synth.linear_unit_tests import Task
from robustvlm.errors import ConfigError
from robustvlm.objectives.base import Hyperparameters
from robustvlm.objectives.invariance import AnnealedHyperparameters

Losses = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]
"""(loss [S, D], R_emp [S, D], R_inv [S, D] or None, lambda [S, D] or None) of one step."""
H = TypeVar("H", bound=Hyperparameters)
A = TypeVar("A", bound=AnnealedHyperparameters)


class Rows(Protocol):
    """One data seed's training rows (`linear.fit.LinearData`): features [N, p], targets [N],
    env [N] long, task."""

    features: torch.Tensor
    targets: torch.Tensor
    env: torch.Tensor
    task: Task


@dataclass
class Cell:
    """The training rows of every data seed of a cell, stacked.

    Attributes:
        features: [S, p, N] float32 inputs (one column per row) with the constant 1 last.
        targets: [S, 1, N] float32 (0/1 labels or real targets).
        env: [S, N] long environment of each row.
        members: [S, N, E] float32, 1 / n_e for the n_e rows of environment e, else 0: an
            environment's mean is `values @ members` (environments may differ in size and, for
            inferred ones, from one data seed to the next).
        task: "regression" or "classification".
        blocks: every data seed's rows are E consecutive blocks of equal size, environment by
            environment (the given environments), so means and per-environment values need no
            products or gathers.
    """

    features: torch.Tensor
    targets: torch.Tensor
    env: torch.Tensor
    members: torch.Tensor
    task: Task
    blocks: bool = False

    @classmethod
    def stack(cls, data: Sequence[Rows], num_envs: int) -> Cell:
        """Stack one `Rows` per data seed (the same number of rows in each); every environment
        must hold rows in every data seed."""
        members = []
        for seed, d in enumerate(data):
            one_hot = F.one_hot(d.env, num_envs).float()  # [N, E]
            counts = one_hot.sum(0, keepdim=True)
            if not bool((counts > 0).all()):
                raise ConfigError(f"batched training: data seed {seed} has an environment without rows")
            members.append(one_hot / counts)
        features = torch.stack([d.features.T for d in data]).contiguous()
        targets = torch.stack([d.targets.float()[None] for d in data])
        env = torch.stack([d.env for d in data])
        blocks = bool((env == torch.arange(num_envs).repeat_interleave(env.shape[1] // num_envs)).all())
        return cls(features, targets, env, torch.stack(members), data[0].task, blocks)

    def env_mean(self, values: torch.Tensor) -> torch.Tensor:
        """[S, ..., E] the mean over each environment's rows of values [S, ..., N]."""
        num_envs = self.members.shape[2]
        if self.blocks:
            return values.view(*values.shape[:-1], num_envs, -1).mean(-1)
        flat = values.reshape(values.shape[0], -1, values.shape[-1])
        return torch.bmm(flat, self.members).view(*values.shape[:-1], num_envs)

    def spread_to_rows(self, per_env: torch.Tensor) -> torch.Tensor:
        """[S, ..., N] the transpose of `env_mean`: row n gets per_env[..., e(n)] / n_e (per_env [S, ..., E])."""
        num_envs = self.members.shape[2]
        if self.blocks:
            size = self.env.shape[1] // num_envs
            return (per_env / size).repeat_interleave(size, dim=-1)
        flat = per_env.reshape(per_env.shape[0], -1, num_envs)
        return torch.bmm(flat, self.members.transpose(1, 2)).view(*per_env.shape[:-1], -1)

    def row_values(self, per_env: torch.Tensor) -> torch.Tensor:
        """[S or 1, ..., N] each row's entry of per_env [E, ...] (1 leading: every seed alike)."""
        moved = per_env.movedim(0, -1)  # [..., E]
        if self.blocks:
            return moved.repeat_interleave(self.env.shape[1] // per_env.shape[0], dim=-1)[None]
        return moved[..., self.env].movedim(-2, 0)


def row_risk(f: torch.Tensor, y: torch.Tensor, task: Task) -> torch.Tensor:
    """[S, D, N] risk of every row under every model (f [S, D, N], y [S, 1, N])."""
    if task == "regression":
        return (f - y).square()
    return F.binary_cross_entropy_with_logits(f, y.expand_as(f), reduction="none")


def scale_grad(f: torch.Tensor, y: torch.Tensor, task: Task) -> torch.Tensor:
    """[S, D, N] d risk / d s of every row at s = 1 for a scale s on f (BIRM's other scales:
    `objectives.birm.BatchedBayesianPenalty`)."""
    return 2.0 * (f - y) * f if task == "regression" else (torch.sigmoid(f) - y) * f


def shift_grad(f: torch.Tensor, y: torch.Tensor, task: Task) -> torch.Tensor:
    """[S, D, N] d risk / d b of every row at b = 0 for a shift b on f."""
    return 2.0 * (f - y) if task == "regression" else torch.sigmoid(f) - y


class BatchedLoss(Generic[H]):
    """The loss of one objective for D draws (hyperparameters per draw) over S data seeds.

    Args:
        hps: one hyperparameter value per draw (the objective's `hparams_class`).
        cell: the training rows of the S data seeds.
    """

    def __init__(self, hps: list[H], cell: Cell):
        self.hps, self.cell, self.task = hps, cell, cell.task
        self.num_envs = cell.members.shape[2]
        self.shape = (cell.features.shape[0], len(hps))

    def per_draw(self, name: str) -> torch.Tensor:
        """[1, D] float64 values of one hyperparameter (`None` -> NaN)."""
        values = [getattr(hp, name) for hp in self.hps]
        return torch.tensor([[math.nan if v is None else float(v) for v in values]], dtype=torch.float64)

    def resets(self, step: int) -> torch.Tensor | None:
        """[1, D] bool: models whose optimizer is re-created before this step (None: none)."""
        return None

    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        """(loss [S, D], R_emp [S, D], R_inv [S, D] or None, lambda [S, D] or None) from the
        outputs f [S, D, N] and targets y [S, 1, N]; `trace`: R_inv is wanted even where lambda is 0."""
        raise NotImplementedError

    def env_risks(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """[S, D, E] mean risk of each environment."""
        return self.cell.env_mean(row_risk(f, y, self.task))

    @staticmethod
    def penalised(r_emp: torch.Tensor, penalty: torch.Tensor, weight: torch.Tensor) -> Losses:
        """R_emp + lambda R_inv, the penalty left out where lambda is 0, from R_emp and R_inv
        [S, D] and lambda [S, D] float64."""
        loss = r_emp + torch.where(weight != 0, weight.float() * penalty, torch.zeros_like(penalty))
        return loss, r_emp, penalty, weight


class AnnealedBatchedLoss(BatchedLoss[A]):
    """`objectives.invariance.AnnealedObjective`'s schedule: lambda_before until anneal_steps,
    then lambda; the optimizer reset at the switch when asked. Subclasses give `penalty`."""

    def __init__(self, hps: list[A], cell: Cell) -> None:
        super().__init__(hps, cell)
        self.anneal = [int(hp.anneal_steps) for hp in hps]
        self.reset_at = [bool(hp.reset_optimizer_at_anneal) and a > 0 for hp, a in zip(hps, self.anneal)]
        self.after, self.before = self.per_draw("lambda_"), self.per_draw("lambda_before")

    def weight(self, step: int) -> torch.Tensor:
        """[1, D] float64 penalty weight at this step."""
        on = torch.tensor([[step >= a for a in self.anneal]])
        return torch.where(on, self.after, self.before)

    def resets(self, step: int) -> torch.Tensor | None:
        mask = torch.tensor([[r and step == a for r, a in zip(self.reset_at, self.anneal)]])
        return mask if bool(mask.any()) else None

    def penalty(self, f: torch.Tensor, y: torch.Tensor, risks: torch.Tensor, step: int) -> torch.Tensor:
        """[S, D] R_inv from the outputs, targets and environment risks [S, D, E]."""
        raise NotImplementedError

    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        risks = self.env_risks(f, y)
        r_emp = risks.mean(2)
        weight = self.weight(step).expand(self.shape)
        if not (trace or bool((weight != 0).any())):
            return r_emp, r_emp, None, weight
        return self.penalised(r_emp, self.penalty(f, y, risks, step), weight)
