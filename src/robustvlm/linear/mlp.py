"""The IRM paper's Colored MNIST model and protocol, trained through the objective classes that
train VLMs (the invariance ladder's first rungs, `experiments.ladder.run`).

The model (Arjovsky et al. 2019, `code/colored_mnist/main.py` of their release): input ->
Linear(hidden) -> ReLU -> Linear(hidden) -> ReLU -> Linear(1), Xavier-uniform weights, zero
biases; one logit f(x) for the binary answer. It is handed to an objective as `AnswerOutputs`
the way `linear.fit` hands a linear model: features h = [penultimate activations, 1] and
classifier W = [0; (w, b)] of the last layer, so the logits are [0, f(x)], the cross-entropy is
the logistic loss of f(x), and the IRMv1 / BIRM scale on the logits is a scale on f(x).

The protocol: full batch (every training row each step), Adam, the loss of the objective plus
`l2` times the summed squares of every parameter, the whole loss divided by the penalty weight
when that weight exceeds 1 (as the paper's release does; Adam is nearly indifferent to it, the
L2 term is not).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives import Objective


class MLP(nn.Module):
    """The IRM paper's MLP: [n, in_dim] -> [n] logits f(x)."""

    def __init__(self, in_dim: int, hidden: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 1)
        for layer in (*self.body[::2], self.head):  # type: ignore[misc]  # torch stubs: a sliced Sequential is iterable
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(inputs))[:, 0]


def mlp_outputs(model: MLP, inputs: torch.Tensor, labels: torch.Tensor, env: torch.Tensor) -> AnswerOutputs:
    """The model's `AnswerOutputs` on full-batch data (one row per example; module doc)."""
    hidden = torch.cat([model.body(inputs), torch.ones(len(inputs), 1)], dim=1)
    last = torch.cat([model.head.weight[0], model.head.bias])
    classifier = torch.stack([torch.zeros_like(last), last])
    return AnswerOutputs(logits=hidden @ classifier.T, targets=labels, example=torch.arange(len(labels)), env=env,
                         hidden=hidden, classifier=classifier)


@dataclass
class MLPFit:
    """A trained (or training) MLP; `diverged` when its loss became non-finite."""

    model: MLP
    diverged: bool = False

    def correct(self, inputs: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """[n] bool: whether each row's answer 1[f(x) > 0] equals its label."""
        with torch.no_grad():
            logits = self.model(torch.from_numpy(inputs).float()).numpy()
        return np.asarray((logits > 0) == (labels > 0))

    def accuracy(self, inputs: np.ndarray, labels: np.ndarray) -> float:
        """Share of rows `correct` (NaN when training diverged)."""
        return float("nan") if self.diverged else float(np.mean(self.correct(inputs, labels)))


def fit_mlp(
    objective: Objective,
    inputs: np.ndarray,
    labels: np.ndarray,
    env: np.ndarray,
    *,
    hidden: int,
    lr: float,
    l2: float,
    steps: int,
    seed: int,
    eval_every: int = 0,
    on_eval: Callable[[int, MLPFit], None] | None = None,
) -> MLPFit:
    """Train the MLP on the training rows by the protocol of the module doc.

    Args:
        objective: built for the training environments; env id i is `objective.env_names[i]`.
        inputs: [n, d] float32; labels: [n] 0/1; env: [n] environment ids.
        hidden, lr, l2, steps: width, Adam step size, L2 weight, full-batch steps.
        seed: seed of the initial weights.
        eval_every, on_eval: `on_eval(steps done, fit)` after every `eval_every` steps and after
            the last one (not after a diverged step).
    """
    torch.manual_seed(seed)
    fit = MLPFit(MLP(inputs.shape[1], hidden))
    x, y, e = torch.from_numpy(inputs).float(), torch.from_numpy(labels).long(), torch.from_numpy(env).long()
    optimizer = torch.optim.Adam(fit.model.parameters(), lr=lr)
    for step in range(steps):
        if objective.resets_optimizer_at(step):
            optimizer.state.clear()
        parts = objective(mlp_outputs(fit.model, x, y, e), step)
        loss = parts.loss + l2 * sum(p.square().sum() for p in fit.model.parameters())
        if parts.weight > 1.0:
            loss = loss / parts.weight
        if not bool(torch.isfinite(loss.detach())):
            fit.diverged = True
            return fit
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        done = step + 1
        if on_eval is not None and ((eval_every and done % eval_every == 0) or done == steps):
            on_eval(done, fit)
    return fit
