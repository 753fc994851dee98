"""Linear probes on frozen features: multinomial logistic regression, scored on multiple-choice
questions. Pure functions on arrays (scikit-learn; nothing is read from disk)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robustvlm.errors import DataError


@dataclass
class LinearProbe:
    """A fitted probe: standardisation (mean, scale over the training features) and the
    logistic-regression head; `classes` in the head's column order."""

    classes: list[str]
    mean: np.ndarray
    scale: np.ndarray
    head: Any

    def scores(self, features: np.ndarray) -> np.ndarray:
        """Class scores (logits) [n, n_classes] of features [n, D]."""
        scores = self.head.decision_function((np.asarray(features, dtype=float) - self.mean) / self.scale)
        return np.stack([-scores, scores], axis=1) if scores.ndim == 1 else scores  # two classes: one column

    def choose(self, features: np.ndarray, options: Sequence[Sequence[str]]) -> list[int]:
        """Per row, the index of its best-scoring option (a class the probe knows)."""
        scores = self.scores(features)
        column = {c: i for i, c in enumerate(self.classes)}
        unknown = {o for opts in options for o in opts} - set(column)
        if unknown:
            raise DataError(f"options {sorted(unknown)} are no class of the probe ({self.classes})")
        return [int(np.argmax([scores[i, column[o]] for o in opts])) for i, opts in enumerate(options)]


def fit_probe(
    features: np.ndarray, labels: Sequence[str], *, n_train: int | None = None, seed: int = 0, c: float = 1.0,
    max_iter: int = 2000,
) -> LinearProbe:
    """Fit a probe on features [N, D] with class labels, on `n_train` of them (a seeded draw
    with every class present; None: all), standardised, L2-regularised with strength 1 / c
    (the objective is convex: Newton-CG finds its minimum several times faster than L-BFGS on
    a thousand features)."""
    from sklearn.linear_model import LogisticRegression

    x, y = np.asarray(features, dtype=float), np.asarray(labels)
    if x.ndim != 2 or len(x) != len(y):
        raise DataError(f"features must be [N, D] with N = len(labels); got {x.shape} and {len(y)} labels")
    classes = sorted(set(y.tolist()))
    if n_train is not None:
        if not len(classes) <= n_train <= len(y):
            raise DataError(f"n_train must lie in [{len(classes)} classes, {len(y)} examples], got {n_train}")
        rng = np.random.default_rng(seed)
        first = [int(rng.choice(np.flatnonzero(y == c))) for c in classes]  # one of each class
        rest = rng.permutation(np.setdiff1d(np.arange(len(y)), first))[: n_train - len(first)]
        keep = np.concatenate([first, rest]).astype(int)
        x, y = x[keep], y[keep]
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    head = LogisticRegression(C=c, solver="newton-cg", max_iter=max_iter).fit((x - mean) / scale, y)
    return LinearProbe(list(head.classes_), mean, scale, head)
