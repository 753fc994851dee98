"""Accuracy-on-the-line fits and effective robustness (as in imagenet-testbed).

Accuracies of a baseline family of models on a reference and a shifted benchmark are mapped
to probit (or logit) space, where they fall close to a line; effective robustness is how far a
model's shifted accuracy lies above that line, mapped back to accuracy units.

All accuracies are fractions in [0, 1]; arrays have shape (n_models,). Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import numpy as np
from scipy import special
from scipy import stats as sps

from robustvlm.analysis.stats import clopper_pearson
from robustvlm.errors import DataError

Transform = Literal["probit", "logit"]
TRANSFORMS: tuple[str, ...] = ("probit", "logit")

#: Accuracies are clipped into [CLIP_EPS, 1 - CLIP_EPS] before the transform, so that 0% and
#: 100% map to finite values (probit(1e-4) = -3.72, logit(1e-4) = -9.21). 1e-4 is half a
#: question on a 5,000-question benchmark: any measured accuracy other than 0 or 1 is untouched.
CLIP_EPS = 1e-4


def _check_kind(kind: str) -> None:
    if kind not in TRANSFORMS:
        raise DataError(f"unknown transform {kind!r}; choose one of {', '.join(TRANSFORMS)}")


def _as_accuracies(acc: np.ndarray | list[float] | float, name: str = "accuracy") -> np.ndarray:
    arr = np.asarray(acc, dtype=float)
    bad = np.flatnonzero(~((arr >= 0) & (arr <= 1)).ravel())  # also catches NaN
    if bad.size:
        raise DataError(
            f"{name} must be fractions in [0, 1]; entry {bad[0]} is {arr.ravel()[bad[0]]}"
        )
    return arr


def transform(
    acc: np.ndarray | list[float] | float, kind: Transform = "probit", *, eps: float = CLIP_EPS
) -> np.ndarray:
    """Map accuracies in [0, 1] to the real line: probit = Phi^-1, logit = log(p / (1 - p)).

    Values are first clipped into [eps, 1 - eps] (see `CLIP_EPS`). Shape is preserved.
    """
    return _forward(acc, kind, eps)


def _forward(acc: np.ndarray | list[float] | float, kind: str, eps: float = CLIP_EPS) -> np.ndarray:
    """`transform` under a name that the `transform=` keyword of the fitting functions can't shadow."""
    _check_kind(kind)
    clipped = np.clip(_as_accuracies(acc), eps, 1 - eps)
    return sps.norm.ppf(clipped) if kind == "probit" else special.logit(clipped)


def inverse_transform(
    z: np.ndarray | list[float] | float, kind: Transform = "probit"
) -> np.ndarray:
    """Map transformed values back to accuracies in (0, 1): Phi(z) or 1 / (1 + exp(-z))."""
    _check_kind(kind)
    z = np.asarray(z, dtype=float)
    return sps.norm.cdf(z) if kind == "probit" else special.expit(z)


@dataclass(frozen=True)
class LineFit:
    """A line z_shift = slope * z_ref + intercept in transformed space.

    Attributes:
        slope, intercept: line coefficients (transformed units).
        r2: coefficient of determination of the fit in transformed space.
        n: number of models the line was fitted on.
        transform: "probit" or "logit".
    """

    slope: float
    intercept: float
    r2: float
    n: int
    transform: Transform = "probit"

    def predict(self, acc_ref: np.ndarray | list[float] | float) -> np.ndarray:
        """beta(acc_ref): the shifted accuracy the line predicts, in accuracy units."""
        z = _forward(acc_ref, self.transform)
        return inverse_transform(self.slope * z + self.intercept, self.transform)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LineFit:
        """The line `to_dict` wrote."""
        return cls(float(d["slope"]), float(d["intercept"]), float(d["r2"]), int(d["n"]), d["transform"])


def _paired(acc_ref: np.ndarray | list[float], acc_shift: np.ndarray | list[float]) -> tuple[np.ndarray, np.ndarray]:
    x = _as_accuracies(acc_ref, "acc_ref").ravel()
    y = _as_accuracies(acc_shift, "acc_shift").ravel()
    if x.shape != y.shape:
        raise DataError(f"acc_ref has {x.size} models but acc_shift has {y.size}")
    return x, y


def fit_line(
    acc_ref: np.ndarray | list[float],
    acc_shift: np.ndarray | list[float],
    *,
    transform: Transform = "probit",
) -> LineFit:
    """Unweighted least-squares line through (T(acc_ref), T(acc_shift)), T the transform.

    Args:
        acc_ref, acc_shift: shape (n_models,), accuracies of the same models on the reference
            and the shifted benchmark. Needs at least two distinct reference accuracies.
    """
    _check_kind(transform)
    x, y = _paired(acc_ref, acc_shift)
    tx, ty = _forward(x, transform), _forward(y, transform)
    if x.size < 2 or np.ptp(tx) == 0:
        raise DataError(
            f"a line needs at least two models with different reference accuracies, got {x.size}"
        )
    slope, intercept = least_squares_rows(tx[None, :], ty[None, :])
    residual = ty - (slope[0] * tx + intercept[0])
    total = np.sum((ty - ty.mean()) ** 2)
    r2 = 1.0 - float(np.sum(residual**2) / total) if total > 0 else 1.0
    return LineFit(float(slope[0]), float(intercept[0]), r2, int(x.size), transform)


def least_squares_rows(tx: np.ndarray, ty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise least-squares slope and intercept; tx, ty: shape (B, k) -> two arrays (B,).

    Every row of tx must hold two distinct values.
    """
    dx = tx - tx.mean(axis=1, keepdims=True)
    slope = np.sum(dx * ty, axis=1) / np.sum(dx * dx, axis=1)
    intercept = ty.mean(axis=1) - slope * tx.mean(axis=1)
    return slope, intercept


@dataclass(frozen=True)
class LineBand:
    """Pointwise bootstrap confidence band of a fitted line.

    Attributes:
        grid: shape (G,), reference accuracies where the band is evaluated.
        lo, hi: shape (G,), band limits in shifted-accuracy units.
        level: confidence level, e.g. 0.95.
        n_boot: resamples used (resamples whose models all share one reference accuracy
            define no line and are left out; `n_boot_drawn - n_boot` of them).
        n_boot_drawn: resamples drawn.
    """

    grid: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    level: float
    n_boot: int
    n_boot_drawn: int

    def to_dict(self) -> dict:
        return {
            "grid": self.grid.tolist(),
            "lo": self.lo.tolist(),
            "hi": self.hi.tolist(),
            "level": self.level,
            "n_boot": self.n_boot,
            "n_boot_drawn": self.n_boot_drawn,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LineBand:
        """The band `to_dict` wrote."""
        return cls(np.asarray(d["grid"], dtype=float), np.asarray(d["lo"], dtype=float),
                   np.asarray(d["hi"], dtype=float), float(d["level"]), int(d["n_boot"]), int(d["n_boot_drawn"]))


def line_band(
    acc_ref: np.ndarray | list[float],
    acc_shift: np.ndarray | list[float],
    grid: np.ndarray | list[float],
    *,
    transform: Transform = "probit",
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> LineBand:
    """Bootstrap band of the line: resample models with replacement, refit, evaluate on `grid`.

    At each grid point the band is the (alpha/2, 1 - alpha/2) percentile of the refitted lines.
    Percentiles are taken in transformed space and mapped back (the inverse transform is
    monotone, so this is the same as taking them in accuracy units).

    Args:
        acc_ref, acc_shift: shape (n_models,), the models the line is fitted on.
        grid: shape (G,), reference accuracies in [0, 1] to evaluate the band at.
    """
    fit_line(acc_ref, acc_shift, transform=transform)  # validates the inputs
    if not 0.0 < alpha < 1.0:
        raise DataError(f"alpha must lie in (0, 1), got {alpha}")
    x, y = _paired(acc_ref, acc_shift)
    tx, ty = _forward(x, transform), _forward(y, transform)
    tgrid = _forward(grid, transform).ravel()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    ok = np.ptp(tx[idx], axis=1) > 0
    if not ok.any():
        raise DataError(f"none of the {n_boot} resamples had two distinct reference accuracies")
    slope, intercept = least_squares_rows(tx[idx[ok]], ty[idx[ok]])
    lines = slope[:, None] * tgrid[None, :] + intercept[:, None]
    lo, hi = np.quantile(lines, [alpha / 2, 1 - alpha / 2], axis=0)
    return LineBand(
        grid=np.asarray(grid, dtype=float).ravel(),
        lo=inverse_transform(lo, transform),
        hi=inverse_transform(hi, transform),
        level=1 - alpha,
        n_boot=int(ok.sum()),
        n_boot_drawn=n_boot,
    )


def effective_robustness(
    acc_ref: np.ndarray | list[float], acc_shift: np.ndarray | list[float], fit: LineFit
) -> np.ndarray:
    """acc_shift - beta(acc_ref): accuracy above the baseline line, in accuracy units.

    beta maps a reference accuracy through the fitted line and back through the inverse
    transform, so the result is a difference of accuracies (multiply by 100 for points).
    Shape (n_models,).
    """
    x, y = _paired(acc_ref, acc_shift)
    return y - fit.predict(x)


#: Reference accuracies at which a line's band is evaluated.
GRID_POINTS = 60


def accuracy_grid(acc_ref: np.ndarray | list[float], kind: Transform = "probit") -> np.ndarray:
    """GRID_POINTS reference accuracies spanning `acc_ref` (plus 5%), evenly spaced in
    transformed units: where a band is drawn. Shape (GRID_POINTS,)."""
    z = transform(acc_ref, kind)
    pad = 0.05 * max(float(np.ptp(z)), 0.1)
    return inverse_transform(np.linspace(z.min() - pad, z.max() + pad, GRID_POINTS), kind)


@dataclass(frozen=True)
class ModelPoint:
    """One model's accuracies on the reference and the shifted benchmark (fractions) and the
    number of questions each was measured on."""

    model: str
    family: str
    acc_ref: float
    acc_shift: float
    n_ref: int
    n_shift: int


@dataclass(frozen=True)
class ModelRobustness:
    """A model's place against a fitted line.

    Attributes:
        point: its accuracies.
        in_fit: whether the line was fitted on it.
        ci_ref, ci_shift: 95% Clopper-Pearson intervals of its accuracies (fractions).
        effective_robustness: shifted accuracy minus the line's prediction (fraction).
    """

    point: ModelPoint
    in_fit: bool
    ci_ref: tuple[float, float]
    ci_shift: tuple[float, float]
    effective_robustness: float

    def to_dict(self) -> dict:
        return {**asdict(self.point), "in_fit": self.in_fit, "ci_ref": list(self.ci_ref),
                "ci_shift": list(self.ci_shift), "effective_robustness": self.effective_robustness}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelRobustness:
        """The model `to_dict` wrote."""
        point = ModelPoint(**{f.name: d[f.name] for f in fields(ModelPoint)})
        ci_ref, ci_shift = (tuple(float(v) for v in d[k]) for k in ("ci_ref", "ci_shift"))
        return cls(point, bool(d["in_fit"]), (ci_ref[0], ci_ref[1]), (ci_shift[0], ci_shift[1]),
                   float(d["effective_robustness"]))


@dataclass(frozen=True)
class RobustnessFit:
    """The line of a baseline family on one (reference, shift) pair, and every model against it."""

    ref: str
    shift: str
    baseline: str | None
    fit: LineFit
    band: LineBand
    models: list[ModelRobustness]

    UNITS = "accuracies and effective robustness are fractions (x 100 = percentage points)"

    def to_dict(self) -> dict:
        """The fit.json content."""
        return {
            "ref": self.ref,
            "shift": self.shift,
            "baseline": self.baseline,
            "transform": self.fit.transform,
            "units": self.UNITS,
            "fit": self.fit.to_dict(),
            "band": self.band.to_dict(),
            "models": [m.to_dict() for m in self.models],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RobustnessFit:
        """The fit `to_dict` wrote (a fit.json)."""
        return cls(d["ref"], d["shift"], d["baseline"], LineFit.from_dict(d["fit"]), LineBand.from_dict(d["band"]),
                   [ModelRobustness.from_dict(m) for m in d["models"]])


def fit_robustness(
    points: list[ModelPoint],
    *,
    ref: str,
    shift: str,
    baseline: str | None = None,
    transform: Transform = "probit",
    n_boot: int = 1000,
    seed: int = 0,
) -> RobustnessFit:
    """Fit the line of `baseline`'s models (all models when None) and place every model.

    Raises DataError when the baseline family has fewer than two models.
    """
    in_fit = [p for p in points if baseline is None or p.family == baseline]
    if len(in_fit) < 2:
        families = sorted({p.family for p in points})
        raise DataError(
            f"baseline family {baseline!r} has {len(in_fit)} model(s) on both {ref!r} and "
            f"{shift!r}; a line needs at least 2 (families: {families})"
        )
    x_fit, y_fit = [p.acc_ref for p in in_fit], [p.acc_shift for p in in_fit]
    fit = fit_line(x_fit, y_fit, transform=transform)
    grid = accuracy_grid([p.acc_ref for p in points], transform)
    band = line_band(x_fit, y_fit, grid, transform=transform, n_boot=n_boot, seed=seed)
    robustness = effective_robustness([p.acc_ref for p in points], [p.acc_shift for p in points], fit)
    models = [
        ModelRobustness(
            point=p,
            in_fit=baseline is None or p.family == baseline,
            ci_ref=clopper_pearson(round(p.acc_ref * p.n_ref), p.n_ref),
            ci_shift=clopper_pearson(round(p.acc_shift * p.n_shift), p.n_shift),
            effective_robustness=float(er),
        )
        for p, er in zip(points, robustness)
    ]
    return RobustnessFit(ref, shift, baseline, fit, band, models)
