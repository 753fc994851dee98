"""Bayesian IRM (static weight): IRMv1's gradient penalty at classifier scales drawn from a prior."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives.base import EVERY_EXPERIMENT, Hyperparameters, LossParts, hparam
from robustvlm.objectives.env_stats import (
    EnvRisks,
    check_env_ids,
    group_sum,
    reduce_env_stats,
    stats_dtype,
)
from robustvlm.objectives.invariance import (
    AnnealedHyperparameters,
    AnnealedObjective,
    anneal_period,
    penalised_parts,
    require,
    reset_at_anneal,
    weight_after,
    weight_before,
)
from robustvlm.objectives.linear_cell import AnnealedBatchedLoss, Cell
from robustvlm.objectives.scale_grad import risk_and_scale_grads, vocab_scale_grad_sums


@dataclass(frozen=True)
class ScaleHyperparameters(Hyperparameters):
    """The hyperparameters of the Bayesian penalty, shared by `birm` and `dynamic_birm`."""

    n_samples: int = hparam(10, ("choice", 5, 10, 20), "classifier-scale draws per environment")
    prior_sd: float = hparam(
        0.025,
        ("log", 1e-3, 0.5),
        "sd of the N(1, sd^2) draws (official BIRM: prior_sd_coef / data_num = 50 / 2000)",
    )
    scope: str = hparam(
        "scalar", ("choice", "scalar", "vocab"), "one scale per env, or per vocab entry"
    )
    seed: int = hparam(0, None, "seed of the draws (each call draws afresh from (seed, call index))")


class BayesianScalePenalty:
    """R_inv of BIRM, as in the official BIRM implementation's `bayes_irmv1`.

    Per environment e, S scales w_{e,s} ~ N(1, prior_sd^2) are drawn (`scope="scalar"`: one
    number; `scope="vocab"`: one per vocabulary entry), and

        R_inv = sum_e mean_s || dR^e/dw at w = w_{e,s} ||^2,

    summed over the environments present, with R^e the environment's mean token risk
    (cross-entropy, or squared error with `AnswerOutputs.risk == "squared"`) under the scaled
    logits. The gradients come in closed form from the logits. With one output (V = 1) the
    vocab scope is the scalar scope (the same draws).
    Call c draws from a generator seeded by (seed, c); `state_dict` holds c so a resumed run
    draws exactly what an uninterrupted one would.
    """

    def __init__(self, method: str, num_envs: int, hp: ScaleHyperparameters):
        require(hp.n_samples >= 1, method, "n_samples must be >= 1")
        require(hp.prior_sd >= 0, method, "prior_sd must be >= 0")
        require(
            hp.scope in ("scalar", "vocab"),
            method,
            f"scope must be 'scalar' or 'vocab', got {hp.scope!r}",
        )
        self.num_envs = num_envs
        self.n_samples = int(hp.n_samples)
        self.prior_sd = float(hp.prior_sd)
        self.scope = hp.scope
        self.seed = int(hp.seed)
        self.calls = 0

    def draw(self, vocab_size: int) -> torch.Tensor:
        """The next scales: [E, S] (scalar scope) or [E, S, V] (vocab scope), float64."""
        shape = (self.num_envs, self.n_samples) + ((vocab_size,) if self.scope == "vocab" else ())
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        return torch.from_numpy(rng.normal(1.0, self.prior_sd, size=shape))

    def __call__(self, out: AnswerOutputs) -> tuple[EnvRisks, torch.Tensor]:
        """(global environment risks, R_inv as a scalar tensor differentiable w.r.t. the logits)."""
        check_env_ids(out.env, self.num_envs)
        dtype = stats_dtype(out)
        scales = self.draw(out.logits.shape[1]).to(out.logits.device, dtype)
        if scales.dim() == 3 and scales.shape[2] == 1:
            scales = scales[..., 0]  # one output: the per-entry scale is the scalar scale
        if scales.dim() == 2:
            risk, grads = risk_and_scale_grads(out, scales[out.env])
            grad_sums = group_sum(grads[:, 1:], out.env, self.num_envs)  # [E, S]
        else:
            risk = out.token_ce()
            grad_sums = vocab_scale_grad_sums(out.logits, out.targets, out.env, scales)
        risks, (grad_sums,) = reduce_env_stats(out, self.num_envs, grad_sums, token_risk=risk)
        counts = risks.counts.clamp(min=1).view(-1, *[1] * (grad_sums.dim() - 1))
        squares = (grad_sums / counts).square()  # [E, S] or [E, S, V]
        per_env = squares.flatten(1).sum(1) / self.n_samples  # mean over draws of ||grad||^2
        return risks, per_env[risks.present].sum()

    def state_dict(self) -> dict[str, Any]:
        """{"calls": draws made so far}."""
        return {"calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the draws where the saved run stopped."""
        self.calls = int(state["calls"])


class BatchedBayesianPenalty:
    """`BayesianScalePenalty` for D draws of one-output linear models (`objectives.linear_cell`):
    the scales drawn per call as it draws them, value for value."""

    def __init__(self, hps: Sequence[ScaleHyperparameters], cell: Cell):
        self.cell, self.task = cell, cell.task
        self.num_envs = cell.members.shape[2]
        self.n_samples = [int(hp.n_samples) for hp in hps]
        self.prior_sd = [float(hp.prior_sd) for hp in hps]
        self.seed = [int(hp.seed) for hp in hps]
        # a one-output model's logits are [0, f] (classification) or [f]: with the vocab scope the
        # scale of the last entry is the scale on f (a scale on the constant 0 changes nothing)
        self.entries = [(2 if cell.task == "classification" else 1) if hp.scope == "vocab" else 0 for hp in hps]
        self.s_max = max(self.n_samples)
        self.groups = {k: [d for d, n in enumerate(self.n_samples) if n == k] for k in sorted(set(self.n_samples))}

    def scales(self, call: int) -> torch.Tensor:
        """[E, D, K] float64: draw d's scales in its first n_samples[d] columns (K = the largest)."""
        base: dict[tuple[int, int, int], np.ndarray] = {}
        out = np.ones((self.num_envs, len(self.seed), self.s_max))
        for d, (seed, k, entries, sd) in enumerate(zip(self.seed, self.n_samples, self.entries, self.prior_sd)):
            key = (seed, k, entries)
            if key not in base:  # normal(1, sd) is 1 + sd * standard_normal, value for value
                shape = (self.num_envs, k) + ((entries,) if entries else ())
                base[key] = np.random.default_rng([seed, call]).standard_normal(shape)
            z = base[key][..., -1] if entries else base[key]
            out[:, d, :k] = 1.0 + sd * z
        return torch.from_numpy(out)

    def __call__(self, f: torch.Tensor, y: torch.Tensor, call: int) -> torch.Tensor:
        """[S, D] sum over environments of the mean over draws of (dR^e/ds at s_ek)^2, from the
        outputs f [S, D, N] and targets y [S, 1, N].

        Draws with the same n_samples are computed together, so none pays for another's samples.
        """
        scales = self.scales(call).float()
        per_env = torch.empty(f.shape[0], f.shape[1], self.num_envs, dtype=f.dtype)  # [S, D, E]
        if self.task == "regression":  # dR^e/ds = 2 (s mean_e f^2 - mean_e y f): two means, whatever the samples
            f_sq, y_f = self.cell.env_mean(f * f), self.cell.env_mean(y * f)  # [S, D, E]
        for k, draws in self.groups.items():
            if self.task == "regression":
                s = scales[:, draws, :k].permute(1, 2, 0)  # [G, k, E]
                grads = 2.0 * (s * f_sq[:, draws, None] - y_f[:, draws, None])  # [S, G, k, E]
            else:
                s = self.cell.row_values(scales[:, draws, :k])  # [S or 1, G, k, N]: each row's environment's
                grads = EnvScaleGrads.apply(f[:, draws], y, s, self.cell)  # [S, G, k, E]
            per_env[:, draws] = grads.square().mean(2)
        return per_env.sum(2)


class EnvScaleGrads(torch.autograd.Function):
    """g[s, d, k, e] = mean over environment e's rows of d logistic loss / d scale at the scale s_k on f.

    The same values as `cell.env_mean((sigmoid(u) - y) f)` with u = s f, with a hand-written backward: one pass over the [S, D, K, N] rows instead of autograd's
    products and broadcast reductions (BIRM's penalty is most of a sweep's time). With
    u = s f: dg/df_n = (sigmoid'(u) u + sigmoid(u) - y) / n_e.
    """

    @staticmethod
    def forward(ctx: Any, f: torch.Tensor, y: torch.Tensor, scale: torch.Tensor, cell: Cell) -> torch.Tensor:  # f [S, D, N], y [S, 1, N], scale [S or 1, D, K, N]
        u = scale * f[:, :, None]
        p = torch.sigmoid(u)
        rows = torch.sub(p, y[:, :, None]).mul_(f[:, :, None])
        ctx.save_for_backward(u, y, p)
        ctx.cell = cell
        return cell.env_mean(rows)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:  # grad [S, D, K, E]
        u, y, p = ctx.saved_tensors  # in place on one buffer: these rows are the largest tensors of a sweep
        d_rows = torch.sub(1.0, p).mul_(p).mul_(u).add_(p).sub_(y[:, :, None])
        return d_rows.mul_(ctx.cell.spread_to_rows(grad)).sum(2), None, None, None


@dataclass(frozen=True)
class BIRMHyperparameters(ScaleHyperparameters, AnnealedHyperparameters):
    """The anneal fields first, then the Bayesian penalty's."""

    lambda_: float = weight_after(1e1)
    lambda_before: float = weight_before(0.0)
    anneal_steps: int = anneal_period(200)
    reset_optimizer_at_anneal: bool = reset_at_anneal(False)


class BatchedBIRM(AnnealedBatchedLoss[BIRMHyperparameters]):
    """BIRM's batched form (`objectives.linear_cell`): `BatchedBayesianPenalty` as R_inv."""

    def __init__(self, hps: list[BIRMHyperparameters], cell: Cell) -> None:
        super().__init__(hps, cell)
        self.bayes = BatchedBayesianPenalty(hps, cell)

    def penalty(self, f: torch.Tensor, y: torch.Tensor, risks: torch.Tensor, step: int) -> torch.Tensor:
        return self.bayes(f, y, step)


class BIRM(AnnealedObjective[BIRMHyperparameters]):
    """Static BIRM: R_emp + lambda * R_inv (BayesianScalePenalty), lambda after an anneal period.

    R_emp is the mean of the environment risks present in the batch. Before `anneal_steps`
    the weight is `lambda_before` (0, as in the official implementation).
    """

    name = "birm"
    hparams_class = BIRMHyperparameters
    label = "BIRM"
    colour = "C3"
    applies_to = EVERY_EXPERIMENT
    batched = BatchedBIRM

    def __init__(self, env_names: list[str], **hparams: Any):
        super().__init__(env_names, **hparams)
        self.penalty = BayesianScalePenalty(self.name, len(self.env_names), self.hp)

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        risks, penalty = self.penalty(out)
        return penalised_parts(risks, penalty, self.penalty_weight(step), self.env_names)

    def state_dict(self) -> dict[str, Any]:
        return self.penalty.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.penalty.load_state_dict(state)
