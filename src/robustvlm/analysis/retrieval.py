"""Retrieval recall@k from a similarity matrix. Pure functions.

Query i is a hit at k when one of its relevant candidates is among the k candidates it scores
highest; recall@k is the share of hits (a fraction, with its Clopper-Pearson interval). Ties
are broken by candidate index (the lower index ranks first), so the result never depends on
the sort algorithm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from robustvlm.analysis.stats import clopper_pearson
from robustvlm.errors import DataError


@dataclass(frozen=True)
class Recall:
    """recall@k = hits / n with its 95% Clopper-Pearson interval."""

    k: int
    recall: float
    hits: int
    n: int
    ci_lo: float
    ci_hi: float

    def to_dict(self) -> dict:
        return asdict(self)


def ranks_of_first_relevant(scores: np.ndarray, relevant: Sequence[Sequence[int]]) -> np.ndarray:
    """Per query, the 1-based rank of its best-ranked relevant candidate; shape (n_queries,).

    Args:
        scores: [n_queries, n_candidates] similarities (higher = closer).
        relevant: per query, the indices of its relevant candidates (at least one).
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or len(relevant) != len(scores):
        raise DataError(f"scores must be [n_queries, n_candidates] with one relevant set per query; got "
                        f"{scores.shape} and {len(relevant)} sets")
    order = np.lexsort((np.broadcast_to(np.arange(scores.shape[1]), scores.shape), -scores), axis=1)
    rank_of = np.empty_like(order)
    rows = np.arange(len(scores))[:, None]
    rank_of[rows, order] = np.arange(1, scores.shape[1] + 1)
    out = np.empty(len(scores), dtype=int)
    for i, rel in enumerate(relevant):
        rel = list(rel)
        if not rel or min(rel) < 0 or max(rel) >= scores.shape[1]:
            raise DataError(f"query {i}: relevant candidates must be indices in [0, {scores.shape[1]}), got {rel}")
        out[i] = rank_of[i, rel].min()
    return out


def recall_at_k(scores: np.ndarray, relevant: Sequence[Sequence[int]], ks: Sequence[int] = (1, 5)) -> list[Recall]:
    """recall@k for each k (see the module doc); scores [n_queries, n_candidates]."""
    ranks = ranks_of_first_relevant(scores, relevant)
    out = []
    for k in ks:
        if k < 1:
            raise DataError(f"k must be >= 1, got {k}")
        hits = int(np.sum(ranks <= k))
        lo, hi = clopper_pearson(hits, len(ranks))
        out.append(Recall(k, hits / len(ranks), hits, len(ranks), lo, hi))
    return out
