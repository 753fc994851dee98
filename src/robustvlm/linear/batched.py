"""Every (draw, data seed) of one example and method trained at once, as one tensor program.

`linear.fit.fit_linear` trains one model through the objective classes that train VLMs; a
sweep trains hundreds of them for 10,000 steps each, and a step there costs ~0.5 ms of Python
and dispatch on a few thousand rows. Here the R = draws x seeds models of one cell share every
step: weights W [S, D, p] (S data seeds, D draws, p = inputs + 1 bias), outputs
f = W X^T [S, D, N] (N rows), environment means as products with [S, N, E] averaging weights,
and each objective's loss in closed form for a one-output linear model (the formulas of
`objectives`; tests/linear/test_batched.py checks every method against `fit_linear`):

- risk of a row: logistic loss of f (cross-entropy of the logits [0, f]) or (f - y)^2;
- d risk / d s at a scale s on f: (sigmoid(s f) - y) f, or 2 (s f - y) f; d risk / d b for a
  shift b: sigmoid(f) - y, or 2 (f - y) (IRMv1's and BIRM's dummies);
- erm: the mean risk over all rows; irm: R_emp (the mean of the environment risks R^e) + lambda sum_e (dR^e/ds^2 + dR^e/db^2) (or mean);
  vrex: + lambda Var_e R^e; groupdro: sum_e q_e R^e with q's exponentiated-gradient update;
  birm: + lambda sum_e mean_k dR^e/ds(s_ek)^2, s_ek ~ N(1, prior_sd^2) drawn as the objective
  draws them; dynamic_birm: BIRM's penalty with `LambdaController`'s lambda, one per model.

Adam is written out because torch.optim.Adam takes one learning rate and weight decay per
parameter group and the models of a cell differ in both; it is torch's single-tensor Adam
update (L2 weight decay added to the gradient, bias-corrected moments), with per-model step
counts so a model whose objective resets the optimizer (IRMv1 / V-REx at their anneal step)
restarts its own moments. A model whose loss stops being finite is stopped with NaN weights,
as in `fit_linear`; the others go on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from robustvlm.data.synth.linear_unit_tests import Task
from robustvlm.errors import ConfigError
from robustvlm.linear.fit import TRACE_KEYS, LinearData, LinearFit
from robustvlm.objectives import REGISTRY
from robustvlm.objectives.base import Hyperparameters
from robustvlm.objectives.birm import BIRMHyperparameters, ScaleHyperparameters
from robustvlm.objectives.dynamic_birm import DynamicBIRMHyperparameters
from robustvlm.objectives.groupdro import GroupDROHyperparameters
from robustvlm.objectives.invariance import AnnealedHyperparameters
from robustvlm.objectives.irm import IRMHyperparameters
from robustvlm.objectives.vrex import VRExHyperparameters

BATCHED = ("erm", "irm", "vrex", "groupdro", "birm", "dynamic_birm")
"""The objectives with a batched form."""
Losses = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]
"""(loss [S, D], R_emp [S, D], R_inv [S, D] or None, lambda [S, D] or None) of one step."""
BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
"""torch.optim.Adam's defaults, which `fit_linear` uses."""
H = TypeVar("H", bound=Hyperparameters)
A = TypeVar("A", bound=AnnealedHyperparameters)


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
    def stack(cls, data: list[LinearData], num_envs: int) -> Cell:
        """Stack one `LinearData` per data seed (the same number of rows in each); every
        environment must hold rows in every data seed."""
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


def _row_risk(f: torch.Tensor, y: torch.Tensor, task: Task) -> torch.Tensor:
    """[S, D, N] risk of every row under every model."""
    if task == "regression":
        return (f - y).square()
    return F.binary_cross_entropy_with_logits(f, y.expand_as(f), reduction="none")


def _scale_grad(f: torch.Tensor, y: torch.Tensor, task: Task) -> torch.Tensor:
    """d risk / d s of every row at s = 1 for a scale s on f (BIRM's other scales: `_BayesianPenalty`)."""
    return 2.0 * (f - y) * f if task == "regression" else (torch.sigmoid(f) - y) * f


def _shift_grad(f: torch.Tensor, y: torch.Tensor, task: Task) -> torch.Tensor:
    """d risk / d b of every row at b = 0 for a shift b on f."""
    return 2.0 * (f - y) if task == "regression" else torch.sigmoid(f) - y


class _Batched(Generic[H]):
    """The loss of one objective for D draws (hyperparameters per draw) over S data seeds."""

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
        """(loss [S, D], R_emp [S, D], R_inv [S, D] or None, lambda [S, D] or None)."""
        raise NotImplementedError

    def env_risks(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """[S, D, E] mean risk of each environment."""
        return self.cell.env_mean(_row_risk(f, y, self.task))


class _ERM(_Batched[Hyperparameters]):
    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        r_emp = _row_risk(f, y, self.task).mean(2)  # the mean over rows, as `objectives.erm.ERM` takes it
        return r_emp, r_emp, None, None


class _Annealed(_Batched[A]):
    """lambda_before until anneal_steps, then lambda; optimizer reset at the switch when asked."""

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
        """[S, D] R_inv."""
        raise NotImplementedError

    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        risks = self.env_risks(f, y)
        r_emp = risks.mean(2)
        weight = self.weight(step).expand(self.shape)
        if not (trace or bool((weight != 0).any())):
            return r_emp, r_emp, None, weight
        penalty = self.penalty(f, y, risks, step)
        loss = r_emp + torch.where(weight != 0, weight.float() * penalty, torch.zeros_like(penalty))
        return loss, r_emp, penalty, weight


class _IRM(_Annealed[IRMHyperparameters]):
    def __init__(self, hps: list[IRMHyperparameters], cell: Cell) -> None:
        super().__init__(hps, cell)
        if any(hp.unbiased for hp in hps):
            raise ConfigError("batched irm: the unbiased (two-halves) penalty has no batched form")
        self.shift = torch.tensor([[bool(hp.shift_dummy) for hp in hps]])
        self.mean = torch.tensor([[hp.penalty_reduction == "mean" for hp in hps]])

    def penalty(self, f: torch.Tensor, y: torch.Tensor, risks: torch.Tensor, step: int) -> torch.Tensor:
        per_env = self.cell.env_mean(_scale_grad(f, y, self.task)).square()  # [S, D, E]
        shift = self.cell.env_mean(_shift_grad(f, y, self.task)).square()
        per_env = per_env + torch.where(self.shift[..., None], shift, 0.0)
        return torch.where(self.mean, per_env.mean(2), per_env.sum(2))


class _VREx(_Annealed[VRExHyperparameters]):
    def penalty(self, f: torch.Tensor, y: torch.Tensor, risks: torch.Tensor, step: int) -> torch.Tensor:
        return (risks - risks.mean(2, keepdim=True)).square().mean(2)


class _BayesianPenalty:
    """BIRM's R_inv for D draws: scales drawn per call as `objectives.birm.BayesianScalePenalty` draws them."""

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
        """[S, D] sum over environments of the mean over draws of (dR^e/ds at s_ek)^2.

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
                grads = _EnvScaleGrads.apply(f[:, draws], y, s, self.cell)  # [S, G, k, E]
            per_env[:, draws] = grads.square().mean(2)
        return per_env.sum(2)


class _EnvScaleGrads(torch.autograd.Function):
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


class _BIRM(_Annealed[BIRMHyperparameters]):
    def __init__(self, hps: list[BIRMHyperparameters], cell: Cell) -> None:
        super().__init__(hps, cell)
        self.bayes = _BayesianPenalty(hps, cell)

    def penalty(self, f: torch.Tensor, y: torch.Tensor, risks: torch.Tensor, step: int) -> torch.Tensor:
        return self.bayes(f, y, step)


class _DynamicBIRM(_Batched[DynamicBIRMHyperparameters]):
    """`objectives.dynamic_birm.LambdaController`, one per model, as [S, D] float64 tensors."""

    def __init__(self, hps: list[DynamicBIRMHyperparameters], cell: Cell) -> None:
        if any(hp.smooth != "lambda" for hp in hps):
            raise ConfigError("method 'dynamic_birm': the batched linear trainer runs the paper's controller "
                              "only (smooth: lambda); train smooth: risks one model at a time")
        super().__init__(hps, cell)
        self.bayes = _BayesianPenalty(hps, cell)
        self.k_skip = [int(hp.k_skip) for hp in hps]
        self.gamma, self.alpha, self.p_min = self.per_draw("gamma"), self.per_draw("alpha"), self.per_draw("p_min")
        self.eps, self.eps_rel, self.cap = self.per_draw("eps"), self.per_draw("eps_rel"), self.per_draw("lambda_max")
        self.value = torch.zeros(self.shape, dtype=torch.float64)
        self.ref = torch.full(self.shape, math.nan, dtype=torch.float64)

    def update(self, step: int, r_emp: torch.Tensor, r_inv: torch.Tensor) -> torch.Tensor:
        """[S, D] lambda_t from detached R_emp and R_inv [S, D] (0 while step < k_skip)."""
        on = torch.tensor([[step >= k for k in self.k_skip]]).expand(self.shape)
        r_emp, r_inv = r_emp.double(), r_inv.double()
        self.ref = torch.where(on & self.ref.isnan(), r_inv, self.ref)
        floor = torch.maximum(self.eps, self.eps_rel * self.ref)
        target = torch.maximum(self.gamma * r_emp, self.p_min) / torch.maximum(r_inv, floor)
        value = self.alpha * self.value + (1.0 - self.alpha) * target
        value = torch.where(self.cap.isnan() | (value <= self.cap), value, self.cap)
        self.value = torch.where(on, value, self.value)
        return torch.where(on, self.value, 0.0)

    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        risks = self.env_risks(f, y)
        r_emp = risks.mean(2)
        penalty = self.bayes(f, y, step)
        weight = self.update(step, r_emp.detach(), penalty.detach())
        loss = r_emp + torch.where(weight != 0, weight.float() * penalty, torch.zeros_like(penalty))
        return loss, r_emp, penalty, weight


class _GroupDRO(_Batched[GroupDROHyperparameters]):
    def __init__(self, hps: list[GroupDROHyperparameters], cell: Cell) -> None:
        super().__init__(hps, cell)
        self.eta = self.per_draw("eta")[..., None]  # [1, D, 1]
        self.q = torch.full((*self.shape, self.num_envs), 1.0 / self.num_envs, dtype=torch.float64)

    def __call__(self, f: torch.Tensor, y: torch.Tensor, step: int, trace: bool) -> Losses:
        risks = self.env_risks(f, y)
        self.q = torch.softmax(self.q.log() + self.eta * risks.detach().double(), dim=2)
        loss = ((self.q / self.q.sum(2, keepdim=True)).to(risks.dtype) * risks).sum(2)
        return loss, risks.mean(2), None, None


_CLASSES: dict[str, type[_Batched[Any]]] = {
    "erm": _ERM, "irm": _IRM, "vrex": _VREx, "groupdro": _GroupDRO, "birm": _BIRM, "dynamic_birm": _DynamicBIRM,
}


class _Adam:
    """torch's single-tensor Adam over [S, D, p] weights: lr and L2 weight decay per draw, step
    count and moments per model (so one model's optimizer reset leaves the others' alone)."""

    def __init__(self, weights: torch.Tensor, configs: list[dict]):
        self.lr = torch.tensor([float(c["lr"]) for c in configs], dtype=torch.float64)[None, :, None]
        self.decay = torch.tensor([float(c["weight_decay"]) for c in configs])[None, :, None]
        self.m, self.v = torch.zeros_like(weights), torch.zeros_like(weights)
        self.t = torch.zeros(weights.shape[0], weights.shape[1], 1, dtype=torch.float64)

    def reset(self, models: torch.Tensor) -> None:
        """Forget the moments and step counts of `models` ([1, D] or [S, D] bool)."""
        keep = ~models[..., None]
        self.m, self.v, self.t = self.m * keep, self.v * keep, self.t * keep

    @torch.no_grad()
    def step(self, weights: torch.Tensor, grad: torch.Tensor, frozen: torch.Tensor) -> None:
        """Update `weights` in place from `grad`, except the `frozen` models ([S, D, 1] bool)."""
        self.t = self.t + 1
        grad = grad + self.decay * weights
        self.m = self.m.lerp(grad, 1 - BETAS[0])
        self.v = self.v * BETAS[1] + (1 - BETAS[1]) * grad * grad
        denom = self.v.sqrt() / (1 - BETAS[1] ** self.t).sqrt().float() + ADAM_EPS
        step_size = (self.lr / (1 - BETAS[0] ** self.t)).float()
        weights.sub_(torch.where(frozen, 0.0, step_size * self.m / denom))


def fit_linear_cell(
    objective: str,
    cell: Cell,
    configs: list[dict],
    *,
    steps: int,
    init_seeds: list[int],
    trace_every: int = 0,
) -> list[list[LinearFit]]:
    """Train D x S linear models of one objective, as `fit_linear` trains each of them.

    Args:
        objective: one of BATCHED.
        cell: the training rows of the S data seeds.
        configs: per draw, {"lr", "weight_decay", "method_args"} (`linear.protocol.draw_config`).
        steps: full-batch Adam steps.
        init_seeds: per draw, the seed of the initial weights (`fit_linear`'s `seed`).
        trace_every: record R_emp, R_inv, lambda every this many steps (0: never).

    Returns:
        fits[d][s], the model of draw d on data seed s.
    """
    if objective not in _CLASSES:
        raise ConfigError(f"batched training: no batched form of {objective!r}; choose one of {list(BATCHED)}")
    n_seeds, dim, _ = cell.features.shape
    hp_class = REGISTRY[objective].hparams_class
    loss_of = _CLASSES[objective]([hp_class.from_config(c["method_args"], objective) for c in configs], cell)
    bound = 1.0 / math.sqrt(dim - 1)  # U(-1/sqrt(d), 1/sqrt(d)), as fit_linear draws it
    init = torch.stack([(2 * torch.rand(dim, generator=torch.Generator().manual_seed(s)) - 1) * bound
                        for s in init_seeds])
    weights = init.expand(n_seeds, -1, -1).clone().requires_grad_()  # [S, D, p]
    adam = _Adam(weights, configs)
    dead = torch.zeros(n_seeds, len(configs), 1, dtype=torch.bool)
    traces: list[tuple[int, torch.Tensor]] = []
    for step in range(steps):
        if (reset := loss_of.resets(step)) is not None:
            adam.reset(reset)
        f = torch.bmm(torch.where(dead, 0.0, weights), cell.features)  # [S, D, N]
        traced = bool(trace_every) and (step % trace_every == 0 or step == steps - 1)
        loss, r_emp, r_inv, weight = loss_of(f, cell.targets, step, traced)
        (grad,) = torch.autograd.grad(torch.where(dead[..., 0], 0.0, loss).sum(), weights)
        adam.step(weights, grad, dead)
        dead |= ~torch.isfinite(loss.detach())[..., None]
        if traced:
            parts = [torch.zeros_like(r_emp) if p is None else p for p in (r_emp, r_inv, weight)]
            traces.append((step, torch.stack([p.detach().double().expand_as(r_emp) for p in parts], -1)))
    final = torch.where(dead, math.nan, weights.detach()).numpy()
    return [
        [LinearFit(final[s, d].copy(), [
            {"step": step, **dict(zip(TRACE_KEYS, map(float, rows[s, d])))} for step, rows in traces
        ]) for s in range(n_seeds)]
        for d in range(len(configs))
    ]
