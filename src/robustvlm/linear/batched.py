"""Every (draw, data seed) of one example and method trained at once, as one tensor program.

`linear.fit.fit_linear` trains one model through the objective classes that train VLMs; a
sweep trains hundreds of them for 10,000 steps each, and a step there costs ~0.5 ms of Python
and dispatch on a few thousand rows. Here the R = draws x seeds models of one cell share every
step: weights W [S, D, p] (S data seeds, D draws, p = inputs + 1 bias), outputs
f = W X^T [S, D, N] (N rows), and each objective's loss in closed form for a one-output linear
model: its batched form, which the objective class declares (`Objective.batched`, built on
`objectives.linear_cell`; tests/linear/test_batched.py checks every one against `fit_linear`).
The objectives with a batched form are read from the one registry (`batched_objectives`); the
others train one model at a time (`linear.protocol.run_cell` says so).

Adam is written out because torch.optim.Adam takes one learning rate and weight decay per
parameter group and the models of a cell differ in both; it is torch's single-tensor Adam
update (L2 weight decay added to the gradient, bias-corrected moments), with per-model step
counts so a model whose objective resets the optimizer (IRMv1 / V-REx at their anneal step)
restarts its own moments. A model whose loss stops being finite is stopped with NaN weights,
as in `fit_linear`; the others go on.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from robustvlm.errors import ConfigError
from robustvlm.linear.fit import TRACE_KEYS, LinearFit
from robustvlm.objectives import REGISTRY
from robustvlm.objectives.linear_cell import BatchedLoss, Cell
from robustvlm.plugins import load_plugins

BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
"""torch.optim.Adam's defaults, which `fit_linear` uses."""


def batched_objectives() -> tuple[str, ...]:
    """The registered objectives (plugins' too) whose class declares a batched form, in
    registry order (read when called, so that one a plugin registers later is among them)."""
    load_plugins()
    return tuple(name for name, cls in REGISTRY.items() if cls.batched is not None)


BATCHED = batched_objectives()
"""The objectives with a batched form, as registered at import."""


def batched_form(objective: str) -> type[BatchedLoss[Any]]:
    """The batched form of `objective`; ConfigError naming the objectives that have one if it has none."""
    form = REGISTRY[objective].batched if objective in batched_objectives() else None
    if form is None:
        raise ConfigError(f"batched training: no batched form of {objective!r}; choose one of "
                          f"{list(batched_objectives())}")
    return form


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
        objective: one of `batched_objectives()`.
        cell: the training rows of the S data seeds.
        configs: per draw, {"lr", "weight_decay", "method_args"} (`linear.protocol.draw_config`).
        steps: full-batch Adam steps.
        init_seeds: per draw, the seed of the initial weights (`fit_linear`'s `seed`).
        trace_every: record R_emp, R_inv, lambda every this many steps (0: never).

    Returns:
        fits[d][s], the model of draw d on data seed s.
    """
    form = batched_form(objective)
    n_seeds, dim, _ = cell.features.shape
    hp_class = REGISTRY[objective].hparams_class
    loss_of = form([hp_class.from_config(c["method_args"], objective) for c in configs], cell)
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
