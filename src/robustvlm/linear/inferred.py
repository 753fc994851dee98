"""Environments of the linear unit tests inferred by EIIL, without their labels.

As Creager et al. (ICML 2021) do: a reference ERM model is trained on the pooled training rows
(draw 0's defaults: Adam lr 1e-3, no weight decay, the run's steps); each row's scale gradient
d loss_i(w f(x_i)) / dw at w = 1 (the quantity IRMv1 penalises, `objectives.scale_grad`) goes to
`analysis.env_inference.eiil_split`, which finds the two-environment split that maximises the
reference model's IRMv1 penalty. The split replaces the given environments for training only:
validation still sums the error over the rows' given environments, which (equal sizes) is the
pooled validation error times their number, so no environment label is used anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from robustvlm.analysis.env_inference import eiil_split, purity
from robustvlm.data.synth.linear_unit_tests import EnvSample, Task
from robustvlm.linear.fit import LinearData, fit_linear, linear_outputs
from robustvlm.objectives import build_objective
from robustvlm.objectives.scale_grad import risk_and_scale_grads

INFERRED_ENVS = ["inferred-0", "inferred-1"]
REFERENCE_LR = 1e-3


@dataclass(frozen=True)
class InferredEnvs:
    """An EIIL split of one problem's training rows.

    Attributes:
        data: the training rows with `env` = the inferred environment (0 or 1) of each row.
        purity: share of rows in their inferred environment's majority given environment.
    """

    data: LinearData
    purity: float


def scale_gradients(weights: torch.Tensor, data: LinearData) -> np.ndarray:
    """[N] d loss_i(w f(x_i)) / dw at w = 1 of the linear model `weights` [d + 1] on every row."""
    out = linear_outputs(weights, data)
    _, grads = risk_and_scale_grads(out, out.logits.new_empty(len(out.targets), 0))
    return grads[:, 0].double().numpy()


def eiil_environments(
    train: list[EnvSample], task: Task, *, steps: int, seed: int, eiil_steps: int = 10_000
) -> InferredEnvs:
    """EIIL's two environments of `train` (its given environments pooled; module doc).

    Args:
        train: the training rows per given environment.
        steps: Adam steps of the reference ERM model.
        eiil_steps: Adam steps of the split's optimisation (`eiil_split`).
        seed: seed of the reference model's initial weights and of the split's initial logits.
    """
    given = LinearData.from_envs(train, task)
    pooled = LinearData(given.features, given.targets, torch.zeros_like(given.env), task)
    reference = fit_linear(build_objective("erm", ["pooled"], {}), pooled, lr=REFERENCE_LR, weight_decay=0.0,
                           steps=steps, seed=seed)
    split = eiil_split(scale_gradients(torch.from_numpy(reference.weights), pooled), steps=eiil_steps, seed=seed)
    inferred = LinearData(given.features, given.targets, torch.from_numpy(split), task)
    return InferredEnvs(inferred, purity(split, given.env.numpy()))
