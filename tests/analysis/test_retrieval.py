"""recall@k against a brute-force count."""

from __future__ import annotations

import numpy as np
import pytest

from robustvlm.analysis.retrieval import ranks_of_first_relevant, recall_at_k
from robustvlm.errors import DataError


def _brute_force(scores, relevant, k):
    hits = 0
    for i, row in enumerate(scores):
        ranked = sorted(range(len(row)), key=lambda j: (-row[j], j))  # ties: lower index first
        hits += any(j in relevant[i] for j in ranked[:k])
    return hits / len(scores)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recall_matches_brute_force_with_ties_and_several_relevant(seed):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.normal(size=(40, 12)), 1)  # rounding makes ties
    relevant = [rng.choice(12, size=rng.integers(1, 4), replace=False).tolist() for _ in range(40)]
    recalls = recall_at_k(scores, relevant, ks=(1, 3, 5, 12))
    for r in recalls:
        assert r.recall == pytest.approx(_brute_force(scores, relevant, r.k))
        assert r.n == 40 and r.ci_lo <= r.recall <= r.ci_hi
    assert recalls[-1].recall == 1.0


def test_ranks_and_errors():
    scores = np.array([[0.1, 0.5, 0.5], [0.9, 0.1, 0.2]])
    assert ranks_of_first_relevant(scores, [[2], [2, 1]]).tolist() == [2, 2]
    with pytest.raises(DataError, match="relevant"):
        ranks_of_first_relevant(scores, [[3], [0]])
    with pytest.raises(DataError, match="one relevant set per query"):
        recall_at_k(scores, [[0]])
