"""Lines of model families and the vertical lift between them (the task-signal experiment).
Pure functions on accuracies.

Each family (models trained with one task signal over seeds and budgets) gets its own line in
probit (or logit) space, fitted by least squares on its models (`analysis.accuracy_on_the_line.fit_line`).
The lift of family A over family B at a matched reference accuracy x is the vertical distance
of their lines there, in accuracy units:

    lift(x) = T^-1(a_A T(x) + b_A) - T^-1(a_B T(x) + b_B)        (T = probit or logit)

x is the reference accuracy at the mean transformed reference accuracy of the two families'
models pooled; when x lies outside either family's range of reference accuracies, the lift is
an extrapolation of that line and flagged so.

Uncertainty: a percentile bootstrap. Each resample draws, with replacement and independently,
n_A models of A and n_B of B, refits both lines and re-evaluates the lift at the same x. Given
every model's per-question outcomes (`outcomes`: the same questions, in the same order, for
every model), each resample also redraws the reference and the shifted questions, shared by all
models, and recomputes every accuracy from them: the interval then also covers which questions
the benchmark happened to hold, which is common to all models and so not part of their scatter.
Draw order, from `numpy.random.default_rng(seed)`: the [n_boot, n_A] model indices of A, the
[n_boot, n_B] of B, then (with outcomes) the [n_boot, n_ref] reference and [n_boot, n_shift]
shifted question indices. Resamples in which a family's drawn models share one reference
accuracy define no line and are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robustvlm.analysis.accuracy_on_the_line import (
    LineFit,
    ModelPoint,
    Transform,
    fit_line,
    inverse_transform,
    least_squares_rows,
    transform,
)
from robustvlm.analysis.stats import IntervalRecord
from robustvlm.errors import DataError


def family_points(points: Sequence[ModelPoint], family: str) -> list[ModelPoint]:
    """The models of one family; a DataError when it has fewer than two (no line)."""
    members = [p for p in points if p.family == family]
    if len(members) < 2:
        raise DataError(f"family {family!r} has {len(members)} model(s); a line needs at least 2")
    return members


def family_lines(points: Sequence[ModelPoint], *, kind: Transform = "probit") -> dict[str, LineFit]:
    """{family: its line} for every family with at least two models of distinct reference
    accuracy (in order of first appearance)."""
    lines = {}
    for family in dict.fromkeys(p.family for p in points):
        members = [p for p in points if p.family == family]
        if len(members) >= 2 and len({p.acc_ref for p in members}) >= 2:
            lines[family] = fit_line([p.acc_ref for p in members], [p.acc_shift for p in members], transform=kind)
    return lines


@dataclass(frozen=True)
class Lift(IntervalRecord):
    """Family `family`'s line minus `baseline`'s at reference accuracy `at_ref` (fractions).

    Attributes:
        lift: the vertical distance in accuracy (fraction; x 100 = points).
        ci: its (alpha/2, 1 - alpha/2) bootstrap percentiles.
        share_above: the share of resamples with a positive lift.
        extrapolated: `at_ref` lies outside one family's range of reference accuracies.
        n_boot: resamples used (of `n_boot_drawn`).
    """

    family: str
    baseline: str
    at_ref: float
    lift: float
    ci: tuple[float, float]
    share_above: float
    extrapolated: bool
    n_boot: int
    n_boot_drawn: int
    level: float


#: model name -> (its 0/1 outcomes on the reference questions [n_ref], on the shifted ones [n_shift])
Outcomes = Mapping[str, tuple[np.ndarray, np.ndarray]]


def _outcome_matrices(members: Sequence[ModelPoint], outcomes: Outcomes) -> tuple[np.ndarray, np.ndarray]:
    """[m, n_ref] and [m, n_shift] boolean outcomes of the members; their means must be the
    members' accuracies."""
    missing = [p.model for p in members if p.model not in outcomes]
    if missing:
        raise DataError(f"no per-question outcomes for {missing}")
    matrices = [np.stack([np.asarray(outcomes[p.model][k], dtype=bool) for p in members]) for k in (0, 1)]
    for matrix, key in zip(matrices, ("acc_ref", "acc_shift")):
        if not np.allclose(matrix.mean(axis=1), [getattr(p, key) for p in members], atol=1e-9):
            raise DataError(f"per-question outcomes do not give the models' {key}")
    return matrices[0], matrices[1]


def _resampled(members: Sequence[ModelPoint], models: np.ndarray, questions: list[np.ndarray] | None,
               outcomes: Outcomes | None,
               kind: Transform) -> tuple[np.ndarray, np.ndarray]:
    """Transformed (reference, shifted) accuracies [n_boot, m] of the drawn models (`models`
    [n_boot, m] indices), on the drawn questions when outcomes are given."""
    if outcomes is None:
        tx, ty = (transform([getattr(p, k) for p in members], kind) for k in ("acc_ref", "acc_shift"))
        return tx[models], ty[models]
    assert questions is not None  # drawn whenever outcomes are given
    accuracies = [matrix[:, q].mean(axis=-1).T for matrix, q in zip(_outcome_matrices(members, outcomes), questions)]
    tx, ty = (np.take_along_axis(transform(acc, kind), models, axis=1) for acc in accuracies)
    return tx, ty


def matched_reference(a: Sequence[ModelPoint], b: Sequence[ModelPoint], *, kind: Transform = "probit") -> float:
    """The reference accuracy at the mean transformed reference accuracy of both families' models."""
    z = transform([p.acc_ref for p in (*a, *b)], kind)
    return float(inverse_transform(z.mean(), kind))


def lift_between(
    points: Sequence[ModelPoint],
    family: str,
    baseline: str,
    *,
    kind: Transform = "probit",
    at_ref: float | None = None,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
    outcomes: Outcomes | None = None,
) -> Lift:
    """The lift of `family`'s line over `baseline`'s (see the module doc).

    Args:
        points: models of both families (others are ignored); each family needs >= 2 models
            with distinct reference accuracies.
        at_ref: the matched reference accuracy; None: `matched_reference`.
        outcomes: per-question outcomes of every model of both families; None: models only are
            resampled.
    """
    if not 0.0 < alpha < 1.0:
        raise DataError(f"alpha must lie in (0, 1), got {alpha}")
    a, b = family_points(points, family), family_points(points, baseline)
    x = matched_reference(a, b, kind=kind) if at_ref is None else float(at_ref)
    zx = float(transform(x, kind))
    fits = [fit_line(*(np.array([getattr(p, k) for p in m]) for k in ("acc_ref", "acc_shift")), transform=kind)
            for m in (a, b)]
    lift = float(inverse_transform(fits[0].slope * zx + fits[0].intercept, kind)
                 - inverse_transform(fits[1].slope * zx + fits[1].intercept, kind))
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(m), size=(n_boot, len(m))) for m in (a, b)]
    questions = None
    if outcomes is not None:
        sizes = [len(outcomes[a[0].model][k]) for k in (0, 1)]
        questions = [rng.integers(0, n, size=(n_boot, n)) for n in sizes]
    predicted, ok = [], np.ones(n_boot, dtype=bool)
    for members, idx in zip((a, b), draws):
        tx, ty = _resampled(members, idx, questions, outcomes, kind)
        valid = np.ptp(tx, axis=1) > 0
        slope, intercept = np.zeros(n_boot), np.zeros(n_boot)
        slope[valid], intercept[valid] = least_squares_rows(tx[valid], ty[valid])
        predicted.append(inverse_transform(slope * zx + intercept, kind))
        ok &= valid
    if not ok.any():
        raise DataError(f"none of the {n_boot} resamples gave both families a line")
    boots = (predicted[0] - predicted[1])[ok]
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    inside = all(min(p.acc_ref for p in m) <= x <= max(p.acc_ref for p in m) for m in (a, b))
    return Lift(family, baseline, x, lift, (float(lo), float(hi)), float(np.mean(boots > 0)), not inside,
                int(ok.sum()), n_boot, 1 - alpha)
