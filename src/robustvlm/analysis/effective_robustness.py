"""Effective robustness of a group of models against another family's line, with a bootstrap
interval (VLMs against the dual-encoder line of the zoo). Pure functions on accuracies.

The line is fitted on the `baseline` family's models in probit (or logit) space
(`analysis.accuracy_on_the_line.fit_line`); a model's effective robustness (ER) is its shifted accuracy
minus the line's prediction at its reference accuracy (accuracy units). The estimate is the mean
ER of `models` minus the mean ER of `against` (0 when `against` is empty): with `against` the
dual encoder whose vision tower a VLM uses, it is how much more robust the VLM is than its own
tower, both measured against the same line.

Uncertainty: a percentile bootstrap. Each resample draws, with replacement and independently,
the baseline's models (the line is refitted), the models of `models` and of `against`; given
every model's per-question outcomes (the same questions in the same order for every model),
it also redraws the reference and the shifted questions, shared by all models, and recomputes
each accuracy from them. Draw order, from `numpy.random.default_rng(seed)`: the [n_boot,
n_baseline] baseline indices, the [n_boot, n_models] indices of `models`, the [n_boot,
n_against] of `against` (when any), then (with outcomes) the [n_boot, n_ref] reference and
[n_boot, n_shift] shifted question indices. With question counts only (`counts=True`, no
outcomes), each model's two accuracies are instead redrawn as Binomial(n, accuracy) / n,
independently per model ([n_boot, all models] reference, then shifted, in the order baseline,
`models`, `against`): shared questions would correlate the models' redraws, which counts cannot
show, so per-question outcomes give the exact paired draw. Resamples whose baseline models share
one reference accuracy define no line and are left out.

`analysis.task_signal` compares two families' lines at one matched accuracy instead; this
module places models against one line, as `analysis.accuracy_on_the_line.fit_robustness` does, and adds
the interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robustvlm.analysis.accuracy_on_the_line import (
    ModelPoint,
    Transform,
    fit_line,
    inverse_transform,
    least_squares_rows,
    transform,
)
from robustvlm.analysis.stats import IntervalRecord
from robustvlm.analysis.task_signal import Outcomes, family_points
from robustvlm.errors import DataError


@dataclass(frozen=True)
class ErEstimate(IntervalRecord):
    """Mean ER of `models` minus mean ER of `against`, against `baseline`'s line (fractions).

    Attributes:
        value: the estimate (x 100 = points).
        ci: its (alpha/2, 1 - alpha/2) bootstrap percentiles.
        share_above: the share of resamples with a positive estimate.
        n_boot: resamples used (of `n_boot_drawn`).
    """

    models: list[str]
    against: list[str]
    baseline: str
    value: float
    ci: tuple[float, float]
    share_above: float
    n_boot: int
    n_boot_drawn: int
    level: float


def _accuracies(members: Sequence[ModelPoint], n_boot: int, questions: list[np.ndarray] | None,
                outcomes: Outcomes | None, binomial: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(reference, shifted) accuracies [n_boot, m] of the members: their measured ones, redrawn
    from their question counts (`binomial`, module doc), or on the drawn questions (`questions`:
    [n_boot, n_ref] and [n_boot, n_shift] indices)."""
    if outcomes is None or questions is None:
        if binomial is not None:
            draws = [binomial.binomial([getattr(p, f"n_{k}") for p in members], [getattr(p, f"acc_{k}") for p in members],
                                       size=(n_boot, len(members))) / np.array([getattr(p, f"n_{k}") for p in members])
                     for k in ("ref", "shift")]
            return draws[0], draws[1]
        return (np.tile([p.acc_ref for p in members], (n_boot, 1)), np.tile([p.acc_shift for p in members], (n_boot, 1)))
    missing = [p.model for p in members if p.model not in outcomes]
    if missing:
        raise DataError(f"no per-question outcomes for {missing}")
    result = []
    for k, (key, drawn) in enumerate(zip(("acc_ref", "acc_shift"), questions)):
        matrix = np.stack([np.asarray(outcomes[p.model][k], dtype=bool) for p in members])  # [m, n]
        if not np.allclose(matrix.mean(axis=1), [getattr(p, key) for p in members], atol=1e-9):
            raise DataError(f"per-question outcomes do not give the models' {key}")
        result.append(matrix[:, drawn].mean(axis=-1).T)  # [n_boot, m]
    return result[0], result[1]


def er_estimate(
    points: Sequence[ModelPoint],
    models: Sequence[str],
    baseline: str,
    *,
    against: Sequence[str] = (),
    kind: Transform = "probit",
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
    outcomes: Outcomes | None = None,
    counts: bool = False,
) -> ErEstimate:
    """Mean ER of `models` (names in `points`) minus that of `against`, against the line of
    family `baseline` (>= 2 models of distinct reference accuracy), with its bootstrap interval
    (module doc; `counts`: also redraw each model's questions from its counts)."""
    if not 0.0 < alpha < 1.0:
        raise DataError(f"alpha must lie in (0, 1), got {alpha}")
    by_name = {p.model: p for p in points}
    unknown = [m for m in (*models, *against) if m not in by_name]
    if unknown or not models:
        raise DataError(f"models to place: need at least one, and all of them measured; unknown {unknown}")
    base = family_points(points, baseline)
    groups = [[by_name[m] for m in models], [by_name[m] for m in against]]
    line = fit_line([p.acc_ref for p in base], [p.acc_shift for p in base], transform=kind)
    value = float(np.mean([p.acc_shift - line.predict(p.acc_ref) for p in groups[0]]))
    if groups[1]:
        value -= float(np.mean([p.acc_shift - line.predict(p.acc_ref) for p in groups[1]]))
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(g), size=(n_boot, len(g))) for g in (base, *groups) if g]
    questions = None
    if outcomes is not None:
        questions = [rng.integers(0, len(outcomes[base[0].model][k]), size=(n_boot, len(outcomes[base[0].model][k])))
                     for k in (0, 1)]
    binomial = rng if counts and outcomes is None else None
    boots, ok = _resampled_estimates(base, groups, draws, questions, outcomes, kind, binomial)
    if not ok.any():
        raise DataError(f"none of the {n_boot} resamples gave family {baseline!r} a line")
    lo, hi = np.quantile(boots[ok], [alpha / 2, 1 - alpha / 2])
    return ErEstimate(list(models), list(against), baseline, value, (float(lo), float(hi)),
                      float(np.mean(boots[ok] > 0)), int(ok.sum()), n_boot, 1 - alpha)


def _resampled_estimates(base: list[ModelPoint], groups: list[list[ModelPoint]], draws: list[np.ndarray],
                         questions: list[np.ndarray] | None, outcomes: Outcomes | None,
                         kind: Transform, binomial: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The estimate in every resample [n_boot] and which resamples define a line [n_boot]."""
    n_boot = draws[0].shape[0]
    acc_ref, acc_shift = _accuracies([*base, *groups[0], *groups[1]], n_boot, questions, outcomes, binomial)
    tx, ty = transform(acc_ref, kind), transform(acc_shift, kind)
    bx, by = (np.take_along_axis(t[:, : len(base)], draws[0], axis=1) for t in (tx, ty))
    ok = np.ptp(bx, axis=1) > 0
    slope, intercept = np.zeros(n_boot), np.zeros(n_boot)
    slope[ok], intercept[ok] = least_squares_rows(bx[ok], by[ok])
    er = acc_shift - inverse_transform(slope[:, None] * tx + intercept[:, None], kind)  # [n_boot, all]
    estimate, start = np.zeros(n_boot), len(base)
    for sign, group, drawn in zip((1.0, -1.0), [g for g in groups if g], draws[1:]):
        columns = er[:, start : start + len(group)]
        estimate += sign * np.take_along_axis(columns, drawn, axis=1).mean(axis=1)
        start += len(group)
    return estimate, ok
