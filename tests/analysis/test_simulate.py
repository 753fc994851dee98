"""The Gaussian location model: fitted probit slopes vs the closed form of
docs/robustness_theory.md, with tolerances computed from d, n, xi and the test-set size."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from robustvlm.analysis.simulate import min_test_examples, simulate
from robustvlm.errors import ConfigError

GEOMETRIES = {
    # the reference distribution is the training distribution (the defaults)
    "ref_is_train": {},
    # both rotated away from training: the shifted one better aligned with it but noisier
    "both_rotated": {"cos_ref": 0.7, "snr_ref": 3.0, "cos_shift": 0.95, "snr_shift": 1.2},
}


def _line_scatter_sd(result: dict) -> np.ndarray:
    """Per-head sd of the probit residual around the true line (theory note, step 4)."""
    p = result["params"]
    slope = result["predicted"]["slope"]
    rho_r, rho_s = p["snr_ref"], p["snr_shift"]
    overlap = p["cos_ref"] * p["cos_shift"]  # <e_ref, e_shift> for the directions used
    v = rho_s**2 + slope**2 * rho_r**2 - 2 * slope * rho_r * rho_s * overlap
    n = np.array([m["n_train"] for m in result["models"]], dtype=float)
    xi = np.array([m["xi"] for m in result["models"]])
    s = xi / (p["snr_train"] * np.sqrt(n))
    return np.sqrt(v) * s / np.sqrt(1 + s**2 * p["dim"])


def _probit_sd(acc: np.ndarray, m: int) -> np.ndarray:
    """Delta-method sd of the probit of an accuracy measured on m examples."""
    return np.sqrt(acc * (1 - acc) / m) / sps.norm.pdf(sps.norm.ppf(acc))


def _ols_se(x: np.ndarray, sigma: np.ndarray) -> tuple[float, float]:
    """Standard errors of the least-squares slope and intercept for independent residuals."""
    dx = x - x.mean()
    a = dx / np.sum(dx**2)  # slope = sum(a_j y_j)
    b = 1 / x.size - x.mean() * a  # intercept = sum(b_j y_j)
    return float(np.sqrt(np.sum(a**2 * sigma**2))), float(np.sqrt(np.sum(b**2 * sigma**2)))


@pytest.fixture(scope="module", params=sorted(GEOMETRIES))
def run(request) -> dict:
    return simulate(**GEOMETRIES[request.param])


def test_exact_accuracies_lie_on_the_predicted_line(run):
    x = sps.norm.ppf([m["acc_ref"] for m in run["models"]])
    se_slope, se_intercept = _ols_se(x, _line_scatter_sd(run))
    predicted = run["predicted"]["slope"]
    assert 4 * se_slope < 0.15 * predicted  # the check below is tight enough to mean something
    assert run["fit_exact"]["slope"] == pytest.approx(predicted, abs=4 * se_slope)
    assert run["fit_exact"]["intercept"] == pytest.approx(0.0, abs=4 * se_intercept)
    assert run["fit_exact"]["r2"] > 0.95


def test_measured_accuracies_lie_on_the_predicted_line(run):
    m = run["params"]["n_test"]
    acc_r = np.array([h["acc_ref_test"] for h in run["models"]])
    acc_s = np.array([h["acc_shift_test"] for h in run["models"]])
    slope = run["predicted"]["slope"]
    sigma = np.sqrt(
        _line_scatter_sd(run) ** 2
        + _probit_sd(acc_s, m) ** 2
        + slope**2 * _probit_sd(acc_r, m) ** 2
    )
    se_slope, _ = _ols_se(sps.norm.ppf(acc_r), sigma)
    assert run["fit_test"]["slope"] == pytest.approx(slope, abs=4 * se_slope)


def test_slope_formula_is_discriminated_from_plausible_wrong_ones(run):
    """The tolerance excludes slopes that ignore the SNRs or the angles."""
    p = run["params"]
    x = sps.norm.ppf([m["acc_ref"] for m in run["models"]])
    se_slope, _ = _ols_se(x, _line_scatter_sd(run))
    fitted = run["fit_exact"]["slope"]
    for wrong in (p["cos_shift"] / p["cos_ref"], p["snr_shift"] / p["snr_ref"], 1.0):
        assert abs(fitted - wrong) > 4 * se_slope


def test_closed_form_accuracy_matches_measured_accuracy(run):
    m = run["params"]["n_test"]
    for head in run["models"]:
        for name in ("ref", "shift"):
            p = head[f"acc_{name}"]
            assert head[f"acc_{name}_test"] == pytest.approx(p, abs=4.5 * np.sqrt(p * (1 - p) / m))


def test_limit_accuracy_is_the_centre_of_the_heads(run):
    """High-dimensional limit (theory eq. 2) vs exact accuracies, averaged over heads: each
    head's probit deviates from its limit by at most about (rho + probit) / sqrt(d)."""
    p = run["params"]
    for name in ("ref", "shift"):
        exact = sps.norm.ppf([h[f"acc_{name}"] for h in run["models"]])
        limit = sps.norm.ppf([h[f"acc_{name}_limit"] for h in run["models"]])
        per_head = (p[f"snr_{name}"] + limit) / np.sqrt(p["dim"])
        tolerance = 4 * np.sqrt(np.sum(per_head**2)) / exact.size
        assert np.mean(exact - limit) == pytest.approx(0.0, abs=tolerance)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"xis": [0.5, 1.0]}, "xi must be >= 1"),
        ({"cos_shift": 0.0}, "cosines"),
        ({"snr_ref": -1.0}, "signal-to-noise"),
        ({"sample_sizes": [100], "xis": [1.0]}, "at least two heads"),
        ({"dim": 2}, "dim"),
        ({"dim": 3, "n_test": 1}, "too small to fit a line.*n_test >= 31"),
        ({"sample_sizes": [100, 100], "xis": [1.0]}, "same predicted reference accuracy"),
    ],
)
def test_bad_simulation_settings_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        simulate(**kwargs)


def test_min_test_examples_follows_its_definition_and_suffices():
    sizes, xis = [1, 1, 2, 3, 6, 12, 24], [1.0, 2.0, 4.0]
    acc = [sps.norm.cdf(2.0 / np.sqrt(1 + xi**2 / (4.0 * n / 3))) for n in sizes for xi in xis]
    mid, spread = (max(acc) + min(acc)) / 2, max(acc) - min(acc)
    needed = min_test_examples(dim=3, sizes=sizes, xis=xis, snr_train=2.0, snr_ref=2.0, cos_ref=1.0)
    assert needed == np.ceil(16 * mid * (1 - mid) / spread**2) == 31
    for seed in range(8):  # at the minimum the measured accuracies always allow a line
        run = simulate(dim=3, n_test=int(needed), seed=seed)
        assert len({h["acc_ref_test"] for h in run["models"]}) >= 2
