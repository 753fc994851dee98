"""The vision gain per environment against a direct computation."""

from __future__ import annotations

import numpy as np
import pytest

from robustvlm.analysis.paired import cluster_bootstrap_ci
from robustvlm.analysis.vision_gain import ALL, vision_gain
from robustvlm.errors import DataError


def test_gain_per_environment_is_the_difference_of_the_means_with_its_paired_interval():
    rng = np.random.default_rng(3)
    keys = [f"q{i}" for i in range(40)]
    envs = {k: ("park" if i % 3 else "street") for i, k in enumerate(keys)}
    normal = {k: float(rng.random() < 0.7) for k in keys}
    blind = {k: float(rng.random() < 0.4) for k in keys}
    rows = vision_gain(normal, blind, envs, seed=1)
    assert [r["env"] for r in rows] == ["park", "street", ALL]
    for row in rows:
        members = [k for k in keys if row["env"] in (ALL, envs[k])]
        a, b = np.array([normal[k] for k in members]), np.array([blind[k] for k in members])
        assert row["n"] == len(members)
        assert row["gain"] == pytest.approx(a.mean() - b.mean())
        assert (row["normal"], row["blind"]) == pytest.approx((a.mean(), b.mean()))
        assert (row["only_normal"], row["only_blind"]) == (int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum()))
        assert (row["ci_lo"], row["ci_hi"]) == pytest.approx(cluster_bootstrap_ci(a - b, seed=1))
        assert row["ci_lo"] <= row["gain"] <= row["ci_hi"]


def test_rotations_of_one_question_are_resampled_together():
    keys = [(q, r) for q in range(6) for r in range(3)]
    normal = {k: float(k[0] % 2) for k in keys}
    blind = {k: 0.0 for k in keys}
    clustered = vision_gain(normal, blind, {k: "e" for k in keys}, clusters={k: k[0] for k in keys})
    assert clustered[0]["ci_lo"] == pytest.approx(
        cluster_bootstrap_ci([normal[k] for k in keys], [k[0] for k in keys])[0])


def test_questions_missing_from_one_run_are_an_error_not_a_drop():
    with pytest.raises(DataError, match="'q2' is only in the normal run"):
        vision_gain({"q1": 1.0, "q2": 0.0}, {"q1": 1.0}, {"q1": "e", "q2": "e"})


def test_a_gain_with_almost_no_spread_gets_its_power_line():
    """Regression: scipy's noncentral t is NaN at df=1+1e-9, nc=8.5 (the lower end of the power
    line's search), and compare_paired then failed on a gain whose per-question differences
    hardly vary (as chrF's do)."""
    from scipy import stats

    from robustvlm.analysis.paired import paired_t_power

    n = 2.0 + 1e-9
    df, nc = n - 1, 6.0 * np.sqrt(n)
    crit = stats.t.ppf(0.975, df)
    assert np.isnan(stats.nct.cdf(-crit, df, nc))  # the library failure this guards against
    mc = np.random.default_rng(0)
    z, v = mc.standard_normal(400_000), mc.chisquare(df, 400_000)
    simulated = np.mean(np.abs((z + nc) / np.sqrt(v / df)) > crit)
    assert paired_t_power(n, 6.0) == pytest.approx(simulated, abs=0.005)
    # and where it fails at a large df (5,000 paired questions, nc 14): the quadrature must find V's peak
    n, effect = 5000, 8.51 / 42.98
    df, nc = n - 1, effect * np.sqrt(n)
    crit = stats.t.ppf(0.975, df)
    assert np.isnan(stats.nct.cdf(-crit, df, nc))
    z, v = mc.standard_normal(400_000), mc.chisquare(df, 400_000)
    simulated = np.mean(np.abs((z + nc) / np.sqrt(v / df)) > crit)
    assert paired_t_power(n, effect) == pytest.approx(simulated, abs=0.005)
    rows = vision_gain({f"q{i}": 0.5 + 1e-4 * i for i in range(4)}, {f"q{i}": 0.1 for i in range(4)},
                       {f"q{i}": "e" for i in range(4)})
    assert rows[-1]["gain"] == pytest.approx(0.4 + 1.5e-4)
