"""Confidence intervals, paired significance tests and seed summaries.

Pure functions on arrays of numbers; nothing here reads files or models.
Accuracies are fractions in [0, 1]. Bad input raises `DataError` (the CLI prints it as one line).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any, Self, cast, get_type_hints

import numpy as np
from scipy import stats as sps

from robustvlm.errors import DataError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Statistic = Callable[[np.ndarray], float]


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise DataError(f"alpha must lie in (0, 1), got {alpha}")


def _as_sample(values: Sequence[float] | np.ndarray, name: str = "values") -> np.ndarray:
    """A finite, non-empty 1-D float array, or a DataError naming the offending position."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise DataError(
            f"{name} must be a non-empty 1-D sequence of numbers, got shape {arr.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise DataError(f"{name}[{bad[0]}] is not a finite number ({arr[bad[0]]})")
    return arr


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact (Clopper-Pearson) two-sided confidence interval for a binomial proportion.

    Args:
        k: number of successes (e.g. correct answers), 0 <= k <= n.
        n: number of trials (questions), n >= 1.
        alpha: 1 - confidence level; the interval has coverage >= 1 - alpha.

    Returns:
        (lo, hi) as fractions in [0, 1]; lo = 0 when k = 0 and hi = 1 when k = n.
    """
    _check_alpha(alpha)
    if int(k) != k or int(n) != n or n < 1 or not 0 <= k <= n:
        raise DataError(f"need integers 0 <= k <= n and n >= 1, got k={k}, n={n}")
    lo = 0.0 if k == 0 else float(sps.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(sps.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    stat: Statistic = np.mean,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of `stat` over i.i.d. `values`.

    Args:
        values: shape (n,), one number per example (e.g. 0/1 correctness or a per-example score).
        stat: maps a resample of shape (n,) to a number; the mean by default.
        n_boot: number of resamples (with replacement, size n each).
        alpha: 1 - confidence level; the interval is the alpha/2 and 1 - alpha/2 quantiles.
        seed: seed of the resampling generator (same seed, same interval).

    Returns:
        (lo, hi) in the units of `stat`.
    """
    _check_alpha(alpha)
    arr = _as_sample(values)
    rng = np.random.default_rng(seed)
    boots = np.array([stat(arr[rng.integers(0, arr.size, arr.size)]) for _ in range(n_boot)])
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def paired_bootstrap_test(
    scores_a: Sequence[float] | np.ndarray,
    scores_b: Sequence[float] | np.ndarray,
    *,
    n_boot: int = 10000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict:
    """Paired bootstrap comparison of two systems scored on the same examples.

    Let d_i = a_i - b_i over the n shared examples and delta = mean(d). Each of the `n_boot`
    resamples draws n example indices with replacement (the same indices for both systems, so
    the pairing is kept) and records delta*_b = mean(d[idx]).

    - `ci` is the percentile interval (alpha/2, 1 - alpha/2 quantiles) of delta*.
    - `p_value` is two-sided, for H0: E[d] = 0. The bootstrap distribution is shifted to the
      null by centring it on delta (delta*_b - delta), and
      p = (1 + #{b : |delta*_b - delta| >= |delta|}) / (n_boot + 1).
      The +1 terms count the observed sample as one draw, so p is never exactly 0.

    Args:
        scores_a, scores_b: shape (n,), per-example scores of systems A and B, in the same
            order (example i of A is example i of B).
        n_boot: number of resamples.
        alpha: 1 - confidence level of `ci`.
        seed: seed of the resampling generator.

    Returns:
        {"delta": mean(a - b), "ci": (lo, hi), "p_value": p, "n": n, "n_boot": n_boot},
        delta and ci in score units.
    """
    _check_alpha(alpha)
    a = _as_sample(scores_a, "scores_a")
    b = _as_sample(scores_b, "scores_b")
    if a.shape != b.shape:
        raise DataError(
            f"paired scores need the same examples: scores_a has {a.size}, scores_b {b.size}"
        )
    diff = a - b
    delta = float(diff.mean())
    rng = np.random.default_rng(seed)
    boots = np.array([diff[rng.integers(0, diff.size, diff.size)].mean() for _ in range(n_boot)])
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    extreme = np.count_nonzero(np.abs(boots - delta) >= abs(delta))
    return {
        "delta": delta,
        "ci": (float(lo), float(hi)),
        "p_value": (1 + int(extreme)) / (n_boot + 1),
        "n": int(diff.size),
        "n_boot": n_boot,
    }


def mean_std(values: Sequence[float] | np.ndarray) -> tuple[float, float | None]:
    """Mean and sample standard deviation (ddof=1) of one metric across seeds.

    Returns:
        (mean, std); std is None for a single value (the spread of one run is unknown,
        and None is written as JSON null, unlike NaN).
    """
    arr = _as_sample(values)
    std = float(arr.std(ddof=1)) if arr.size > 1 else None
    return float(arr.mean()), std


def summarize_seeds(runs: Sequence[Mapping[str, float]]) -> dict[str, dict]:
    """Summarize the same metrics measured in several runs (one mapping per seed).

    Args:
        runs: e.g. [{"acc_id": 0.91, "acc_ood": 0.55}, {"acc_id": 0.90, "acc_ood": 0.61}];
            every run must report the same metric names.

    Returns:
        {metric: {"mean", "std", "min", "max", "n"}} with std as in `mean_std`.
    """
    if not runs:
        raise DataError("summarize_seeds needs at least one run")
    names = list(runs[0])
    for i, run in enumerate(runs):
        if set(run) != set(names):
            missing = sorted(set(names) ^ set(run))
            raise DataError(f"run {i} does not report the same metrics as run 0: {missing}")
    summary = {}
    for name in names:
        column = [run[name] for run in runs]
        arr = _as_sample(column, name)
        mean, std = mean_std(arr)
        summary[name] = {
            "mean": mean,
            "std": std,
            "min": float(arr.min()),
            "max": float(arr.max()),
            "n": int(arr.size),
        }
    return summary


# How `IntervalRecord.from_dict` reads each field type of an estimate from its JSON value.
_FIELD_READERS: dict[object, Callable[[Any], Any]] = {
    str: str,
    float: float,
    int: int,
    bool: bool,
    list[str]: lambda values: [str(v) for v in values],
    tuple[float, float]: lambda pair: (float(pair[0]), float(pair[1])),
}


def interval_verdict(ci: tuple[float, float]) -> str:
    """"above" or "below" zero when the interval `ci` excludes it, else "indistinguishable"."""
    if ci[0] > 0:
        return "above"
    return "below" if ci[1] < 0 else "indistinguishable"


class IntervalRecord:
    """Base of the frozen dataclass estimates that carry a `ci` interval around zero.

    Gives them a JSON round trip (`to_dict`, `from_dict`: each field read back as its declared
    type: str, float, int, bool, list[str], a (low, high) interval) and a `verdict`.
    """

    ci: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        """The estimate as a JSON-ready dict (`ci` a list)."""
        values = asdict(cast("DataclassInstance", self))
        return {**values, "ci": list(values["ci"])}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Self:
        """The estimate that `to_dict` wrote."""
        hints = get_type_hints(cls)
        fields_of = fields(cast("type[DataclassInstance]", cls))
        return cls(**{f.name: _FIELD_READERS[hints[f.name]](values[f.name]) for f in fields_of})

    @property
    def verdict(self) -> str:
        """"above", "below" or "indistinguishable" (the interval holds 0)."""
        return interval_verdict(self.ci)
