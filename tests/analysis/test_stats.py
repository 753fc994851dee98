"""Statistics against scipy and against brute-force enumeration of every bootstrap resample."""

from __future__ import annotations

import itertools
import json
import statistics
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats as sps

from robustvlm.analysis.stats import (
    IntervalRecord,
    bootstrap_ci,
    clopper_pearson,
    mean_std,
    paired_bootstrap_test,
    summarize_seeds,
)
from robustvlm.errors import DataError


@pytest.mark.parametrize(
    ("k", "n", "alpha"),
    [(0, 10, 0.05), (10, 10, 0.05), (3, 17, 0.05), (431, 500, 0.1), (1, 1, 0.2)],
)
def test_clopper_pearson_matches_scipy_exact_interval(k, n, alpha):
    expected = sps.binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="exact")
    lo, hi = clopper_pearson(k, n, alpha)
    assert lo == pytest.approx(expected.low, abs=1e-12)
    assert hi == pytest.approx(expected.high, abs=1e-12)


@pytest.mark.parametrize(("k", "n"), [(5, 4), (-1, 4), (0, 0), (1.5, 4)])
def test_clopper_pearson_rejects_impossible_counts(k, n):
    with pytest.raises(DataError):
        clopper_pearson(k, n)


def _weighted_quantile_bracket(values: np.ndarray, v: float) -> tuple[float, float]:
    """(P(X < v), P(X <= v)) under the uniform distribution on `values` (ties to 1e-12)."""
    return float(np.mean(values < v - 1e-12)), float(np.mean(values <= v + 1e-12))


@pytest.mark.parametrize("stat", [np.mean, np.median])
def test_bootstrap_ci_matches_scipy_percentile_bootstrap(stat):
    values = np.random.default_rng(3).normal(size=200)
    ref = sps.bootstrap(
        (values,), stat, n_resamples=20000, method="percentile", random_state=11, vectorized=True
    ).confidence_interval
    lo, hi = bootstrap_ci(values, stat=stat, n_boot=20000, seed=5)
    # Monte-Carlo sd of a 2.5% quantile of the bootstrap distribution over 20000 draws is
    # about 0.0013 here (0.07 * sqrt(.025 * .975 / 20000) / phi(1.96)); two independent
    # runs differ by about 0.002 sd, and the median's bootstrap distribution is lumpier.
    assert lo == pytest.approx(ref.low, abs=0.012)
    assert hi == pytest.approx(ref.high, abs=0.012)
    assert bootstrap_ci(values, stat=stat, n_boot=500, seed=5) == bootstrap_ci(
        values, stat=stat, n_boot=500, seed=5
    )


def test_bootstrap_ci_rejects_empty_and_nan():
    with pytest.raises(DataError):
        bootstrap_ci([])
    with pytest.raises(DataError, match=r"values\[1\]"):
        bootstrap_ci([0.1, float("nan")])


def _exact_paired_bootstrap(diff: np.ndarray) -> np.ndarray:
    """Mean of diff over every one of the n^n equally likely resamples."""
    n = diff.size
    idx = np.array(list(itertools.product(range(n), repeat=n)))
    return diff[idx].mean(axis=1)


def test_paired_bootstrap_matches_exhaustive_enumeration():
    rng = np.random.default_rng(7)
    a = rng.normal(0.6, 0.2, size=6)
    b = a - rng.normal(0.02, 0.15, size=6)  # exact p-value about 0.24
    n_boot = 20000
    result = paired_bootstrap_test(a, b, n_boot=n_boot, seed=1)

    diff = a - b
    delta = diff.mean()
    exact = _exact_paired_bootstrap(diff)
    p_exact = np.mean(np.abs(exact - delta) >= abs(delta) - 1e-12)
    assert result["delta"] == pytest.approx(delta, abs=1e-15)
    mc_sd = np.sqrt(p_exact * (1 - p_exact) / n_boot)
    assert result["p_value"] == pytest.approx(p_exact, abs=4 * mc_sd + 2 / n_boot)
    # each CI end must be a valid 2.5% / 97.5% quantile of the exact bootstrap distribution,
    # up to Monte-Carlo error (0.0011 sd at 20000 draws)
    for end, q in zip(result["ci"], (0.025, 0.975)):
        below, at_or_below = _weighted_quantile_bracket(exact, end)
        assert below - 0.006 <= q <= at_or_below + 0.006


def test_paired_bootstrap_is_antisymmetric_and_detects_a_clear_difference():
    rng = np.random.default_rng(0)
    a = (rng.random(400) < 0.7).astype(float)  # 0/1 correctness of system A
    b = (rng.random(400) < 0.5).astype(float)
    ab = paired_bootstrap_test(a, b, n_boot=2000, seed=3)
    ba = paired_bootstrap_test(b, a, n_boot=2000, seed=3)
    assert ab["delta"] == pytest.approx(-ba["delta"])
    assert ab["ci"] == pytest.approx((-ba["ci"][1], -ba["ci"][0]))
    assert ab["p_value"] == pytest.approx(ba["p_value"])
    assert ab["p_value"] == pytest.approx(1 / 2001)  # no resample crosses zero
    assert ab["ci"][0] > 0


def test_paired_bootstrap_rejects_unpaired_scores():
    with pytest.raises(DataError, match="same examples"):
        paired_bootstrap_test([1.0, 0.0, 1.0], [1.0, 0.0])


def test_mean_std_uses_the_sample_standard_deviation():
    values = [0.81, 0.79, 0.86, 0.75]
    assert mean_std(values) == pytest.approx((statistics.mean(values), statistics.stdev(values)))
    assert mean_std([0.5]) == (0.5, None)


def test_summarize_seeds_per_metric_and_mismatched_runs():
    runs = [{"id": 0.9, "ood": 0.5}, {"id": 0.8, "ood": 0.7}, {"id": 0.85, "ood": 0.6}]
    summary = summarize_seeds(runs)
    assert summary["ood"]["mean"] == pytest.approx(0.6)
    assert summary["ood"]["std"] == pytest.approx(statistics.stdev([0.5, 0.7, 0.6]))
    assert (summary["id"]["min"], summary["id"]["max"], summary["id"]["n"]) == (0.8, 0.9, 3)
    with pytest.raises(DataError, match="run 1"):
        summarize_seeds([{"id": 0.9, "ood": 0.5}, {"id": 0.8}])


@dataclass(frozen=True)
class _Estimate(IntervalRecord):
    models: list[str]
    value: float
    ci: tuple[float, float]
    held: bool
    n_boot: int


def test_an_interval_record_is_written_as_json_and_read_back_as_its_field_types():
    estimate = _Estimate(["a", "b"], 0.25, (0.125, 0.5), True, 7)
    written = estimate.to_dict()
    assert written == {"models": ["a", "b"], "value": 0.25, "ci": [0.125, 0.5], "held": True, "n_boot": 7}
    read = _Estimate.from_dict(json.loads(json.dumps(written)))
    assert read == estimate and isinstance(read.ci, tuple)
    # values written as other JSON types come back as the declared ones
    read = _Estimate.from_dict({**written, "value": 1, "ci": [0, 1], "n_boot": 7.0})
    assert (type(read.value), read.ci, type(read.ci[0]), type(read.n_boot)) == (float, (0.0, 1.0), float, int)


@pytest.mark.parametrize(("ci", "verdict"), [((0.01, 0.2), "above"), ((-0.3, -0.01), "below"), ((-0.1, 0.1), "indistinguishable"), ((0.0, 0.1), "indistinguishable")])
def test_an_interval_records_verdict_says_whether_its_interval_excludes_zero(ci, verdict):
    assert _Estimate(["a"], 0.0, ci, False, 1).verdict == verdict
