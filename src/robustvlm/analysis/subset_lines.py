"""Past the single line: accuracy-on-the-line fits on subsets of the shifted questions, where
per-question correctness exists. Pure functions on arrays.

Inputs: `id_acc` (m,), each model's reference (in-distribution) accuracy, fractions;
`shift_correct` (m, n), each model's score on each shifted question (0/1, or in [0, 1]), the same
questions in the same order for every model; `labels` (n,), each question's subset (a class, an
environment).

- `subset_lines`: the average line (ID accuracy against accuracy on all shifted questions) and
  one line per subset, each with a bootstrap interval of its slope over models; a subset shares
  the average line's slope when its interval holds it, and the share of shifted questions in such
  subsets says how much of the shifted set the average line describes.
- `worst_subset`: a search for the shifted questions on which ID accuracy predicts shifted
  accuracy worst, made honest by a split of the models: on one half (search), each question is
  scored by the correlation between its correctness and the transformed ID accuracy, and the
  `fraction` of questions with the lowest correlation is chosen (questions every search model got
  equally right or wrong carry no evidence and are not chosen); on the other half (held out), the
  line is fitted on the chosen questions and on the rest. The search half's r² is optimistic by
  construction; the held-out r² is the one to read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from robustvlm.analysis.accuracy_on_the_line import (
    LineFit,
    Transform,
    fit_line,
    least_squares_rows,
    transform,
)
from robustvlm.errors import DataError


@dataclass(frozen=True)
class SubsetLine:
    """One subset's line: its questions, the fit, its slope's bootstrap interval over models
    and whether that interval holds the average line's slope."""

    subset: str
    questions: int
    line: LineFit
    slope_ci: tuple[float, float]
    shares_slope: bool

    def to_dict(self) -> dict:
        return {"subset": self.subset, "questions": self.questions, "line": self.line.to_dict(),
                "slope_ci": list(self.slope_ci), "shares_slope": self.shares_slope}


@dataclass(frozen=True)
class SubsetLines:
    """The average line, every subset's line, and the share of shifted questions in subsets
    that share the average line's slope."""

    average: LineFit
    subsets: list[SubsetLine]
    share_on_average_slope: float

    def to_dict(self) -> dict:
        return {"average": self.average.to_dict(), "subsets": [s.to_dict() for s in self.subsets],
                "share_on_average_slope": self.share_on_average_slope}


def _checked(id_acc: Sequence[float] | np.ndarray, shift_correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(id_acc, dtype=float), np.asarray(shift_correct, dtype=float)
    if y.ndim != 2 or y.shape[0] != x.size or y.shape[1] == 0:
        raise DataError(f"need a (models, questions) score matrix for {x.size} models, got shape {y.shape}")
    if x.size < 3:
        raise DataError(f"subset lines need at least 3 models, got {x.size}")
    return x, y


def slope_interval(id_acc: np.ndarray, acc: np.ndarray, *, kind: Transform = "probit", n_boot: int = 1000,
                   alpha: float = 0.05, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the line's slope over resamples of the models (shapes (m,));
    resamples whose models share one ID accuracy are left out."""
    tx, ty = transform(id_acc, kind), transform(acc, kind)
    idx = np.random.default_rng(seed).integers(0, tx.size, size=(n_boot, tx.size))
    ok = np.ptp(tx[idx], axis=1) > 0
    slope, _ = least_squares_rows(tx[idx[ok]], ty[idx[ok]])
    lo, hi = np.quantile(slope, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def subset_lines(id_acc: Sequence[float] | np.ndarray, shift_correct: np.ndarray, labels: Sequence[str], *,
                 kind: Transform = "probit", n_boot: int = 1000, seed: int = 0) -> SubsetLines:
    """The average line and one line per subset of `labels` (module doc), subsets in order of
    first appearance."""
    x, y = _checked(id_acc, shift_correct)
    names = np.asarray([str(label) for label in labels])
    if names.size != y.shape[1]:
        raise DataError(f"need one label per shifted question ({y.shape[1]}), got {names.size}")
    average = fit_line(x, y.mean(axis=1), transform=kind)
    subsets = []
    for name in dict.fromkeys(names.tolist()):
        acc = y[:, names == name].mean(axis=1)
        ci = slope_interval(x, acc, kind=kind, n_boot=n_boot, seed=seed)
        subsets.append(SubsetLine(name, int(np.sum(names == name)), fit_line(x, acc, transform=kind), ci,
                                  ci[0] <= average.slope <= ci[1]))
    share = sum(s.questions for s in subsets if s.shares_slope) / y.shape[1]
    return SubsetLines(average, subsets, share)


@dataclass(frozen=True)
class WorstSubset:
    """The searched subset: its question indices (into the shifted questions), the models of
    each half, and the r² and slope of the line on it, on the rest and on all questions."""

    questions: list[int]
    search_models: list[int]
    held_out_models: list[int]
    search_r2: float
    held_out_r2: float
    held_out_slope: float
    held_out_rest_r2: float
    held_out_all_r2: float

    def to_dict(self) -> dict:
        return asdict(self)


def question_scores(tx: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Pearson correlation (n,) of each question's scores (m, n) with the transformed ID accuracy
    tx (m,); NaN where the question's scores do not vary."""
    dx = tx - tx.mean()
    dy = correct - correct.mean(axis=0)
    spread = np.sqrt(np.sum(dy**2, axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(spread > 0, (dx @ dy) / (np.sqrt(np.sum(dx**2)) * spread), np.nan)


def worst_subset(id_acc: Sequence[float] | np.ndarray, shift_correct: np.ndarray, *, fraction: float = 0.25,
                 kind: Transform = "probit", seed: int = 0) -> WorstSubset:
    """The held-out search of the module doc: models split at random (numpy default_rng(seed)
    permutation; the first half searches), the lowest-correlation `fraction` of questions chosen."""
    x, y = _checked(id_acc, shift_correct)
    if not 0.0 < fraction < 1.0:
        raise DataError(f"fraction must lie in (0, 1), got {fraction}")
    if x.size < 6:
        raise DataError(f"a held-out search needs at least 6 models (3 per half), got {x.size}")
    order = np.random.default_rng(seed).permutation(x.size)
    search, held = np.sort(order[: x.size // 2]), np.sort(order[x.size // 2 :])
    scores = question_scores(transform(x[search], kind), y[search])
    eligible = np.flatnonzero(~np.isnan(scores))
    take = max(1, round(fraction * y.shape[1]))
    if eligible.size <= take:
        raise DataError(f"only {eligible.size} shifted questions vary across the search models; need more than {take}")
    chosen = np.sort(eligible[np.argsort(scores[eligible], kind="stable")[:take]])
    rest = np.setdiff1d(np.arange(y.shape[1]), chosen)

    def line(models: np.ndarray, questions: np.ndarray) -> LineFit:
        return fit_line(x[models], y[np.ix_(models, questions)].mean(axis=1), transform=kind)

    held_line = line(held, chosen)
    return WorstSubset(chosen.tolist(), search.tolist(), held.tolist(), line(search, chosen).r2, held_line.r2,
                       held_line.slope, line(held, rest).r2, line(held, np.arange(y.shape[1])).r2)
