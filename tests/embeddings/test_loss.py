"""InfoNCE against a direct computation, with and without duplicate targets."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from robustvlm.embeddings.loss import info_nce
from robustvlm.errors import ConfigError


def _direct(q: np.ndarray, t: np.ndarray, tau: float, groups=None) -> float:
    """-log softmax of the positive, one row at a time, in float64."""
    total = 0.0
    for i in range(len(q)):
        scores = [float(q[i] @ t[j]) / tau for j in range(len(t))
                  if groups is None or j == i or groups[j] != groups[i]]
        positive = float(q[i] @ t[i]) / tau
        total += -(positive - math.log(sum(math.exp(s) for s in scores)))
    return total / len(q)


@pytest.fixture
def embeddings():
    g = torch.Generator().manual_seed(0)
    q = F.normalize(torch.randn(6, 5, generator=g, dtype=torch.float64), dim=-1)
    t = F.normalize(torch.randn(6, 5, generator=g, dtype=torch.float64), dim=-1)
    return q, t


def test_matches_the_direct_computation(embeddings):
    q, t = embeddings
    for tau in (0.02, 0.5):
        assert float(info_nce(q, t, temperature=tau)) == pytest.approx(_direct(q.numpy(), t.numpy(), tau), rel=1e-6)


def test_duplicate_targets_are_no_negatives(embeddings):
    q, t = embeddings
    groups = [0, 1, 0, 2, 1, 0]
    got = float(info_nce(q, t, temperature=0.1, groups=torch.tensor(groups)))
    assert got == pytest.approx(_direct(q.numpy(), t.numpy(), 0.1, groups), rel=1e-6)
    assert got != pytest.approx(float(info_nce(q, t, temperature=0.1)), rel=1e-3)
    # distinct groups change nothing
    assert float(info_nce(q, t, temperature=0.1, groups=torch.arange(6))) == pytest.approx(
        float(info_nce(q, t, temperature=0.1)), rel=1e-12)


def test_bad_shapes_and_temperature(embeddings):
    q, t = embeddings
    with pytest.raises(ConfigError, match="\\[B, D\\]"):
        info_nce(q, t[:3])
    with pytest.raises(ConfigError, match="temperature"):
        info_nce(q, t, temperature=0.0)
