"""A linear model trained through the same objective classes that train VLMs.

The model is f(x) = w . [x, 1] (a bias through a constant input). It is handed to an
objective as `AnswerOutputs` with features h = [x, 1] and classifier W = the linear map:

- regression: W = w as a [1, d + 1] map, one prediction per row, `risk="squared"`;
- binary classification: W = [0; w] as a [2, d + 1] map, so the logits are [0, f(x)] and
  the cross-entropy is the logistic loss of f(x) (what `BCEWithLogitsLoss` computes), and
  the IRMv1 / BIRM scale on the logits is a scale on f(x).

Training is full-batch Adam with L2 weight decay (`torch.optim.Adam(weight_decay=...)`), all
environments in every step, as in the linear unit tests' release; an objective that asks
for an optimizer reset (IRMv1 / V-REx at the end of their anneal) gets one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from robustvlm.data.synth.linear_unit_tests import EnvSample, Task
from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives import Objective

TRACE_KEYS = ("R_emp", "R_inv", "lambda")


@dataclass
class LinearData:
    """Environments stacked for one linear model.

    Attributes:
        features: [N, d + 1] float32, the inputs with a constant 1 appended (the bias input).
        targets: [N] float32 (regression) or long 0/1 (classification).
        env: [N] long, the environment index of each row.
        task: "regression" or "classification".
    """

    features: torch.Tensor
    targets: torch.Tensor
    env: torch.Tensor
    task: Task

    @classmethod
    def from_envs(cls, envs: list[EnvSample], task: Task) -> LinearData:
        """Stack environments in order; environment i gets id i."""
        inputs = np.concatenate([e.inputs for e in envs])
        features = torch.from_numpy(np.concatenate([inputs, np.ones((len(inputs), 1))], axis=1)).float()
        targets = torch.from_numpy(np.concatenate([e.targets for e in envs])).float()
        env = torch.cat([torch.full((len(e.targets),), i, dtype=torch.long) for i, e in enumerate(envs)])
        return cls(features, targets if task == "regression" else targets.long(), env, task)


def linear_outputs(weights: torch.Tensor, data: LinearData) -> AnswerOutputs:
    """The model's `AnswerOutputs` on `data`: one row per example (see the module doc).

    Args:
        weights: [d + 1] the linear map (last entry: the bias).
    """
    risk: Literal["ce", "squared"]
    if data.task == "regression":
        classifier, risk = weights.unsqueeze(0), "squared"
    else:
        classifier, risk = torch.stack([torch.zeros_like(weights), weights]), "ce"
    return AnswerOutputs(
        logits=data.features @ classifier.T,
        targets=data.targets,
        example=torch.arange(len(data.targets)),
        env=data.env,
        hidden=data.features,
        classifier=classifier,
        risk=risk,
    )


@dataclass
class LinearFit:
    """A trained linear model.

    Attributes:
        weights: [d + 1] float32 (last entry: the bias); NaN when training diverged.
        trace: every `trace_every` steps, {"step", "R_emp", "R_inv", "lambda"} from the
            objective's log row.
    """

    weights: np.ndarray
    trace: list[dict[str, float]] = field(default_factory=list)

    @property
    def diverged(self) -> bool:
        return not bool(np.isfinite(self.weights).all())


def fit_linear(
    objective: Objective,
    data: LinearData,
    *,
    lr: float,
    weight_decay: float,
    steps: int,
    seed: int,
    trace_every: int = 0,
) -> LinearFit:
    """Train w by full-batch Adam on `objective(linear_outputs(w, data), step)`.

    Args:
        objective: built for the environments of `data`, in order.
        lr, weight_decay: Adam's step size and L2 weight decay.
        steps: optimizer steps (each sees every row).
        seed: seed of the initial weights, U(-1/sqrt(d), 1/sqrt(d)) like `torch.nn.Linear`.
        trace_every: record the objective's R_emp, R_inv and lambda every this many steps (0: never).
    """
    dim = data.features.shape[1] - 1
    generator = torch.Generator().manual_seed(seed)
    bound = 1.0 / math.sqrt(dim)
    init = (2 * torch.rand(dim + 1, generator=generator) - 1) * bound
    weights = init.requires_grad_()
    optimizer = torch.optim.Adam([weights], lr=lr, weight_decay=weight_decay)
    trace = []
    for step in range(steps):
        if objective.resets_optimizer_at(step):
            optimizer.state.clear()
        parts = objective(linear_outputs(weights, data), step)
        optimizer.zero_grad(set_to_none=True)
        parts.loss.backward()
        optimizer.step()
        if trace_every and (step % trace_every == 0 or step == steps - 1):
            row = parts.log_row()
            trace.append({"step": step, **{k: row[k] for k in TRACE_KEYS}})
        if not bool(torch.isfinite(parts.loss.detach())):
            weights.data.fill_(math.nan)
            break
    return LinearFit(weights.detach().numpy().copy(), trace)


def errors(weights: np.ndarray, envs: list[EnvSample], task: Task) -> list[float]:
    """Error of f(x) = w . [x, 1] in each environment.

    Regression: mean squared error (target units squared). Classification: the share of rows
    where 1[f(x) > 0] differs from the label (0-1). NaN weights give NaN errors.
    """
    out = []
    for e in envs:
        f = e.inputs @ weights[:-1] + weights[-1]
        if task == "regression":
            out.append(float(np.mean((f - e.targets) ** 2)))
        else:
            out.append(float(np.mean((f > 0) != (e.targets > 0.5))) if np.isfinite(f).all() else math.nan)
    return out
