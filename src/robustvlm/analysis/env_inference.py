"""Environments inferred from data, for invariance training without environment labels.

Three ways to split training examples into two environments, from a reference model (usually
ERM) trained on all of them:

- `eiil_split`: Environment Inference for Invariant Learning (Creager, Jacobsen, Zemel, ICML
  2021): the soft assignment q_i in [0, 1] of example i to environment 1 that *maximises* the
  reference model's IRMv1 penalty, the mean over e of (dR^e/dw at w = 1)^2, optimised with Adam
  on the assignment's logits (initialised N(0, 1)), then made hard (q > 0.5). As in the
  authors' release, an environment's risk is the q-weighted mean over all N examples,
  R^e = (1/N) sum_i q_ie l_i (not normalised by the environment's weight: normalised, the
  optimum is a near-empty environment holding the single most extreme example). Only the
  per-example scale gradients g_i = dl_i(w f_i)/dw at w = 1 enter: dR^e/dw = (1/N) sum_i q_ie g_i.
- `loss_split`: the examples the reference model gets most wrong (loss above a quantile) apart
  from the rest, as JTT's and FEED's error sets.
- `cluster_split`: k-means of the reference model's features (scikit-learn's KMeans).

`purity` scores a split against known groups (the given environments, or the examples where a
spurious cue agrees with the label).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.cluster import KMeans


def eiil_penalty(q: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """The IRMv1 penalty of a two-environment soft split (module doc): q [N] in [0, 1] (weight in
    environment 1; 1 - q in environment 0), grads [N] the per-example scale gradients."""
    return torch.stack([(weight * grads).mean() for weight in (1.0 - q, q)]).square().mean()


def eiil_split(scale_grads: np.ndarray, *, steps: int = 10_000, lr: float = 0.001, seed: int = 0) -> np.ndarray:
    """[N] 0/1 environments maximising the reference model's IRMv1 penalty (module doc; the
    authors' release: 10,000 Adam steps at lr 0.001)."""
    grads = torch.as_tensor(np.asarray(scale_grads, dtype=np.float64))
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(len(grads), generator=generator, dtype=torch.float64).requires_grad_()
    optimizer = torch.optim.Adam([logits], lr=lr)
    for _ in range(steps):
        loss = -eiil_penalty(torch.sigmoid(logits), grads)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return (torch.sigmoid(logits) > 0.5).long().numpy()


def loss_split(losses: np.ndarray, *, quantile: float = 0.5) -> np.ndarray:
    """[N] 1 for the examples whose loss is above the `quantile` of the losses, else 0."""
    losses = np.asarray(losses, dtype=float)
    return (losses > np.quantile(losses, quantile)).astype(np.int64)


def cluster_split(features: np.ndarray, *, k: int = 2, seed: int = 0) -> np.ndarray:
    """[N] k-means cluster (0..k-1) of each row of `features` [N, d]."""
    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(np.asarray(features)).astype(np.int64)


def purity(inferred: np.ndarray, groups: np.ndarray) -> float:
    """Share of examples in their inferred environment's majority group: sum over inferred
    environments of the size of its largest group, over N (1: every environment is one group)."""
    inferred, groups = np.asarray(inferred), np.asarray(groups)
    total = 0
    for env in np.unique(inferred):
        _, counts = np.unique(groups[inferred == env], return_counts=True)
        total += int(counts.max())
    return total / len(inferred)
