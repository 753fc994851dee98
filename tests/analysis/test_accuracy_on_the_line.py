"""Probit/logit lines and effective robustness vs scipy, enumeration and hand computation (the
report edge: tests/workflows/measure/test_robustness_fit.py; the plot helpers: tests/report/test_plots.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from robustvlm.analysis.accuracy_on_the_line import (
    CLIP_EPS,
    effective_robustness,
    fit_line,
    inverse_transform,
    line_band,
    transform,
)
from robustvlm.errors import DataError

# ---------------------------------------------------------------- transforms


def test_transforms_match_scipy_and_invert():
    acc = np.array([0.03, 0.2, 0.5, 0.77, 0.999])
    np.testing.assert_allclose(transform(acc, "probit"), sps.norm.ppf(acc))
    np.testing.assert_allclose(transform(acc, "logit"), np.log(acc / (1 - acc)))
    for kind in ("probit", "logit"):
        np.testing.assert_allclose(inverse_transform(transform(acc, kind), kind), acc)


def test_transforms_clip_zero_and_one_to_finite_values():
    ends = transform([0.0, 1.0], "probit")
    np.testing.assert_allclose(ends, [sps.norm.ppf(CLIP_EPS), -sps.norm.ppf(CLIP_EPS)])
    np.testing.assert_allclose(transform([0.0], "logit"), [special.logit(CLIP_EPS)])


@pytest.mark.parametrize(
    ("acc", "kind"), [([0.5, 1.2], "probit"), ([np.nan], "probit"), ([0.5], "arcsin")]
)
def test_transforms_reject_bad_input(acc, kind):
    with pytest.raises(DataError):
        transform(acc, kind)


# ---------------------------------------------------------------- line fits


@pytest.mark.parametrize("kind", ["probit", "logit"])
def test_fit_line_matches_linregress_in_transformed_space(kind):
    rng = np.random.default_rng(4)
    acc_ref = rng.uniform(0.4, 0.97, size=15)
    acc_shift = np.clip(acc_ref - rng.uniform(0.05, 0.3, size=15), 0.01, 1)
    fit = fit_line(acc_ref, acc_shift, transform=kind)
    ref = sps.linregress(transform(acc_ref, kind), transform(acc_shift, kind))
    assert fit.slope == pytest.approx(ref.slope)
    assert fit.intercept == pytest.approx(ref.intercept)
    assert fit.r2 == pytest.approx(ref.rvalue**2)
    assert (fit.n, fit.transform) == (15, kind)


def test_hand_example_line_and_effective_robustness():
    # three baseline models exactly on probit(shift) = 0.5 * probit(ref) - 0.3
    z_ref = np.array([0.0, 1.0, 2.0])  # accuracies 50%, 84.13%, 97.72%
    fit = fit_line(sps.norm.cdf(z_ref), sps.norm.cdf(0.5 * z_ref - 0.3))
    assert (fit.slope, fit.intercept, fit.r2) == pytest.approx((0.5, -0.3, 1.0))
    # a model at 50% reference accuracy is expected at Phi(-0.3) = 38.21% on the shift;
    # scoring 45% it is 6.79 points above the line.
    er = effective_robustness([0.5], [0.45], fit)
    assert er[0] == pytest.approx(0.45 - 0.382088578, abs=1e-9)


def test_logit_effective_robustness_by_hand():
    # logit(shift) = logit(ref) - 1: at ref = 50% the line predicts 1 / (1 + e) = 26.89%
    ref = np.array([0.5, 0.8, 0.9])
    shift = special.expit(special.logit(ref) - 1)
    fit = fit_line(ref, shift, transform="logit")
    assert effective_robustness([0.5], [0.30], fit)[0] == pytest.approx(0.30 - 1 / (1 + np.e))


@pytest.mark.parametrize(
    ("ref", "shift", "match"),
    [
        ([0.7], [0.6], "at least two"),
        ([0.7, 0.7], [0.6, 0.5], "at least two"),
        ([0.7, 0.8], [0.6], "2 models"),
    ],
)
def test_fit_line_rejects_underdetermined_input(ref, shift, match):
    with pytest.raises(DataError, match=match):
        fit_line(ref, shift)


def _exact_band(z_ref: np.ndarray, z_shift: np.ndarray, z_grid: np.ndarray) -> np.ndarray:
    """Fitted-line values on the grid for every one of the k^k model resamples (with scipy)."""
    k = z_ref.size
    lines = []
    for idx in itertools.product(range(k), repeat=k):
        idx = list(idx)
        if np.ptp(z_ref[idx]) == 0:
            continue  # no line through one repeated point
        res = sps.linregress(z_ref[idx], z_shift[idx])
        lines.append(res.intercept + res.slope * z_grid)
    return np.array(lines)


def test_line_band_matches_exhaustive_resampling():
    rng = np.random.default_rng(2)
    acc_ref = rng.uniform(0.55, 0.95, size=5)
    acc_shift = sps.norm.cdf(0.8 * sps.norm.ppf(acc_ref) - 0.4 + rng.normal(0, 0.08, size=5))
    grid = np.array([0.5, 0.75, 0.9, 0.97])
    band = line_band(acc_ref, acc_shift, grid, n_boot=20000, seed=1)
    exact = _exact_band(sps.norm.ppf(acc_ref), sps.norm.ppf(acc_shift), sps.norm.ppf(grid))
    assert 5 < band.n_boot_drawn - band.n_boot < 70  # expected 20000 * 5 / 5**5 = 32 degenerate
    for j in range(grid.size):
        for end, q in ((band.lo[j], 0.025), (band.hi[j], 0.975)):
            z = sps.norm.ppf(end)
            below = np.mean(exact[:, j] < z - 1e-9)
            at_or_below = np.mean(exact[:, j] <= z + 1e-9)
            assert below - 0.006 <= q <= at_or_below + 0.006  # 0.0011 Monte-Carlo sd


def test_line_band_of_two_models_is_their_line_and_skips_one_point_resamples():
    # a resample of two models either repeats one (no line, left out) or holds both
    ref, shift = [0.6, 0.9], [0.4, 0.7]
    band = line_band(ref, shift, [0.5, 0.75, 0.95], n_boot=400, seed=0)
    line = fit_line(ref, shift).predict([0.5, 0.75, 0.95])
    np.testing.assert_allclose(band.lo, line)
    np.testing.assert_allclose(band.hi, line)
    assert 150 < band.n_boot < 250 and band.n_boot_drawn == 400  # about half are degenerate
