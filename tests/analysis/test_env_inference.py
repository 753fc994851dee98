"""Environment inference (`analysis.env_inference`) against brute force and hand computations."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
import torch

from robustvlm.analysis.env_inference import (
    cluster_split,
    eiil_penalty,
    eiil_split,
    loss_split,
    purity,
)


def _hard_penalty(assign: np.ndarray, grads: np.ndarray) -> float:
    """The penalty of a hard split, by hand: each environment's summed scale gradient over N."""
    return float(np.mean([(grads[assign == e].sum() / len(grads)) ** 2 for e in (0, 1)]))


def test_penalty_is_the_squared_mean_scale_gradient_of_each_environment():
    grads = np.array([0.5, -1.0, 2.0, 0.25])
    q = np.array([0.0, 1.0, 1.0, 0.0])
    got = float(eiil_penalty(torch.tensor(q), torch.tensor(grads)))
    assert got == pytest.approx(_hard_penalty(q.astype(int), grads))
    soft = np.array([0.2, 0.7, 0.9, 0.5])
    by_hand = ((np.dot(1 - soft, grads) / 4) ** 2 + (np.dot(soft, grads) / 4) ** 2) / 2
    assert float(eiil_penalty(torch.tensor(soft), torch.tensor(grads))) == pytest.approx(by_hand)


def test_eiil_finds_the_split_brute_force_finds():
    grads = np.random.default_rng(0).normal(size=10) + np.array([1.5] * 4 + [0.0] * 6)
    best = max((np.array(a) for a in product((0, 1), repeat=10)), key=lambda a: _hard_penalty(a, grads))
    found = eiil_split(grads, steps=3000, lr=0.05)
    assert _hard_penalty(found, grads) == pytest.approx(_hard_penalty(best, grads), rel=1e-6)
    assert sorted(map(tuple, (found, 1 - found)))[0] == sorted(map(tuple, (best, 1 - best)))[0]


def test_loss_split_cluster_split_and_purity():
    assert loss_split(np.array([0.1, 3.0, 0.2, 2.0]), quantile=0.5).tolist() == [0, 1, 0, 1]
    rng = np.random.default_rng(1)
    features = np.concatenate([rng.normal(0, 0.1, (20, 3)), rng.normal(5, 0.1, (30, 3))])
    truth = np.array([0] * 20 + [1] * 30)
    assert purity(cluster_split(features, seed=0), truth) == 1.0
    assert purity(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])) == 0.75
    assert purity(np.zeros(4, int), np.array([0, 1, 0, 1])) == 0.5
