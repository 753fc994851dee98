"""Paired statistics for two models scored on the same questions: the difference with a paired
(optionally cluster) bootstrap interval, the exact McNemar test for 0/1 scores, standard errors
clustered by a user-named column, and the number of questions a difference needs at a given
power. Pure functions on arrays.

Written here rather than taken whole from statsmodels (which the tests use as the reference):
the cluster bootstrap and the per-environment table have no library counterpart, and the rest
is a few lines of scipy.

Conventions: `a` and `b` have shape (n,), one score per question in the same order (0/1 for
accuracy, any float for a per-sample metric such as chrF); differences are a - b in score
units; `clusters` has shape (n,), one label per question (questions sharing a label, e.g. the
rotations of one circular question or rephrasings of one image, are resampled together).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
from scipy import integrate, optimize, stats

from robustvlm.errors import DataError


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise DataError(f"paired scores need the same non-empty questions (got {x.shape} and {y.shape})")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise DataError("paired scores must be finite numbers")
    return x, y


def _cluster_index(clusters: Sequence[Hashable] | None, n: int) -> np.ndarray:
    """Integer cluster ids of shape (n,), numbered in order of first appearance; each question
    its own cluster when None."""
    if clusters is None:
        return np.arange(n)
    if len(clusters) != n:
        raise DataError(f"need one cluster label per question (got {len(clusters)} for {n})")
    ids: dict[str, int] = {}
    return np.asarray([ids.setdefault(str(c), len(ids)) for c in clusters])


def clustered_se(diff: Sequence[float], clusters: Sequence[Hashable] | None = None) -> float:
    """Standard error of mean(diff), cluster-robust (CR1, as statsmodels' OLS on a constant with
    `cov_type="cluster"`): sqrt(G/(G-1) * sum_g (sum_{i in g} (d_i - mean d))^2) / n. With every
    question its own cluster this is the usual sd(diff, ddof=1) / sqrt(n)."""
    d = np.asarray(diff, dtype=float)
    index = _cluster_index(clusters, d.size)
    groups = int(index.max()) + 1
    if groups < 2:
        raise DataError("a clustered standard error needs at least two clusters")
    sums = np.bincount(index, weights=d - d.mean(), minlength=groups)
    return float(np.sqrt(groups / (groups - 1) * np.sum(sums**2)) / d.size)


def cluster_bootstrap_ci(
    diff: Sequence[float], clusters: Sequence[Hashable] | None = None, *, n_boot: int = 2000,
    alpha: float = 0.05, seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of mean(diff) over resamples of whole clusters (questions when None):
    each resample draws G clusters with replacement and takes the mean over their questions."""
    d = np.asarray(diff, dtype=float)
    index = _cluster_index(clusters, d.size)
    groups = int(index.max()) + 1
    sums = np.bincount(index, weights=d, minlength=groups)
    sizes = np.bincount(index, minlength=groups).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, groups, size=(n_boot, groups))
    boots = sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def mcnemar_exact(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> tuple[int, int, float]:
    """(only A right, only B right, two-sided exact McNemar p-value): the binomial test of the
    discordant questions against 1/2 (p = 1 when there are none)."""
    a, b = (np.asarray(x, dtype=bool) for x in (a_correct, b_correct))
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return only_a, only_b, 1.0
    return only_a, only_b, float(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)


def paired_t_power(n: float, effect: float, alpha: float = 0.05) -> float:
    """Power of the two-sided one-sample t-test on n paired differences whose mean is `effect`
    standard deviations from 0 (noncentral t with n - 1 degrees of freedom)."""
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = effect * np.sqrt(n)
    power = float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))
    return power if np.isfinite(power) else _t_power_by_quadrature(df, crit, nc)


def _t_power_by_quadrature(df: float, crit: float, nc: float) -> float:
    """P(|T| > crit) for T = (Z + nc) / sqrt(V / df), V ~ chi2(df), by quadrature over V: scipy's
    noncentral t is NaN for some large noncentralities (e.g. df=1, nc=8.5)."""
    def conditional(u: float) -> float:  # over the quantiles of V, so the quadrature finds its peak at any df
        s = crit * np.sqrt(float(stats.chi2.ppf(u, df)) / df)
        return float(stats.norm.sf(s - nc) + stats.norm.cdf(-s - nc))

    return float(integrate.quad(conditional, 0, 1, limit=200)[0])


def questions_needed(
    delta: float, sd_diff: float, *, power: float = 0.8, alpha: float = 0.05, design_effect: float = 1.0
) -> float | None:
    """Questions needed to detect a mean paired difference `delta` (score units) at `power`, for
    differences of standard deviation `sd_diff` (the paired t-test, as statsmodels' TTestPower),
    times `design_effect` (clustered / i.i.d. variance of the mean). None when sd_diff is 0."""
    if delta == 0 or not 0 < power < 1:
        raise DataError("questions_needed: delta must be non-zero and power in (0, 1)")
    if sd_diff <= 0:
        return None
    effect = abs(delta) / sd_diff
    normal = ((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) / effect) ** 2  # z-test answer
    low = 2.0 + 1e-9
    if paired_t_power(low, effect, alpha) >= power:  # a difference so clear that two questions show it
        return float(low * max(design_effect, 1.0))
    n = optimize.brentq(lambda m: paired_t_power(m, effect, alpha) - power, low, 2 * normal + 10)
    return float(n * max(design_effect, 1.0))


@dataclass(frozen=True)
class PairedComparison:
    """A against B on n shared questions: means, difference a - b, its cluster-robust standard
    error and paired (cluster) bootstrap interval; for 0/1 scores the discordant counts and the
    exact McNemar p-value; the questions a difference of `power_delta` needs at 80% power."""

    n: int
    clusters: int
    mean_a: float
    mean_b: float
    difference: float
    se: float
    ci_lo: float
    ci_hi: float
    only_a: int | None
    only_b: int | None
    mcnemar_p: float | None
    power_delta: float
    questions_needed: float | None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedComparison:
        """Read back what `to_dict` wrote (other keys of `data` are ignored)."""
        return cls(**{f.name: data[f.name] for f in fields(cls)})


def compare_paired(
    a: Sequence[float], b: Sequence[float], *, clusters: Sequence[Hashable] | None = None,
    power_delta: float = 0.05, n_boot: int = 2000, seed: int = 0,
) -> PairedComparison:
    """`PairedComparison` of per-question scores `a` and `b` (shapes (n,), same order)."""
    x, y = _paired(a, b)
    d = x - y
    index = _cluster_index(clusters, d.size)
    groups = int(index.max()) + 1
    se = clustered_se(d, clusters) if groups > 1 else float("nan")
    lo, hi = cluster_bootstrap_ci(d, clusters, n_boot=n_boot, seed=seed)
    binary = bool(np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all())
    only_a, only_b, p = mcnemar_exact(x == 1, y == 1) if binary else (None, None, None)
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    iid_se = sd / np.sqrt(d.size) if d.size > 1 else 0.0
    design = (se / iid_se) ** 2 if iid_se > 0 and np.isfinite(se) else 1.0
    needed = questions_needed(power_delta, sd, design_effect=design)
    return PairedComparison(int(d.size), groups, float(x.mean()), float(y.mean()), float(d.mean()), se,
                            lo, hi, only_a, only_b, p, power_delta, needed)
