"""Mean effective robustness against another family's line, and its bootstrap interval, against a
direct computation and a direct (loop) bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from robustvlm.analysis.accuracy_on_the_line import ModelPoint
from robustvlm.analysis.effective_robustness import ErEstimate, er_estimate
from robustvlm.errors import DataError

N_Q = 40  # questions per benchmark


def _outcomes(seed: int, names: list[str], p_ref: list[float], p_shift: list[float]) -> dict:
    rng = np.random.default_rng(seed)
    return {n: (rng.random(N_Q) < a, rng.random(N_Q) < b) for n, a, b in zip(names, p_ref, p_shift)}


@pytest.fixture
def setting() -> tuple[list[ModelPoint], dict]:
    """Four dual encoders roughly on a line, three VLMs a bit above it (0/1 outcomes on N_Q questions)."""
    names = ["d0", "d1", "d2", "d3", "v0", "v1", "v2"]
    outcomes = _outcomes(0, names, [0.3, 0.5, 0.7, 0.9, 0.4, 0.6, 0.8], [0.15, 0.3, 0.5, 0.7, 0.35, 0.55, 0.7])
    points = [ModelPoint(n, "dual" if n[0] == "d" else "vlm", float(r.mean()), float(s.mean()), N_Q, N_Q)
              for n, (r, s) in outcomes.items()]
    return points, outcomes


def _direct_er(points: list[ModelPoint], names: list[str], line: np.ndarray) -> float:
    by = {p.model: p for p in points}
    return float(np.mean([by[n].acc_shift - stats.norm.cdf(np.polyval(line, stats.norm.ppf(by[n].acc_ref)))
                          for n in names]))


def _probit(acc: np.ndarray) -> np.ndarray:
    return stats.norm.ppf(np.clip(acc, 1e-4, 1 - 1e-4))


def test_the_estimate_is_the_mean_distance_above_the_baseline_line(setting):
    points, _ = setting
    duals = [p for p in points if p.family == "dual"]
    line = np.polyfit(_probit(np.array([p.acc_ref for p in duals])), _probit(np.array([p.acc_shift for p in duals])), 1)
    vlms = ["v0", "v1", "v2"]
    estimate = er_estimate(points, vlms, "dual", n_boot=200)
    assert estimate.value == pytest.approx(_direct_er(points, vlms, line))
    contrast = er_estimate(points, ["v2"], "dual", against=["d3"], n_boot=200)
    assert contrast.value == pytest.approx(_direct_er(points, ["v2"], line) - _direct_er(points, ["d3"], line))
    assert estimate.models == vlms and contrast.against == ["d3"] and estimate.level == 0.95


def test_the_interval_is_a_direct_bootstrap_over_models_and_questions(setting):
    """A loop over resamples, in the documented draw order, gives the same percentiles."""
    points, outcomes = setting
    n_boot, seed = 300, 3
    estimate = er_estimate(points, ["v0", "v1"], "dual", against=["d2"], n_boot=n_boot, seed=seed, outcomes=outcomes)
    rng = np.random.default_rng(seed)
    duals, targets, against = ["d0", "d1", "d2", "d3"], ["v0", "v1"], ["d2"]
    draws = [rng.integers(0, len(g), size=(n_boot, len(g))) for g in (duals, targets, against)]
    q_ref, q_shift = (rng.integers(0, N_Q, size=(n_boot, N_Q)) for _ in range(2))
    boots = []
    for b in range(n_boot):
        acc = {n: (outcomes[n][0][q_ref[b]].mean(), outcomes[n][1][q_shift[b]].mean()) for n in outcomes}
        xs = _probit(np.array([acc[duals[i]][0] for i in draws[0][b]]))
        if np.ptp(xs) == 0:
            continue
        line = np.polyfit(xs, _probit(np.array([acc[duals[i]][1] for i in draws[0][b]])), 1)

        def er(name: str, line: np.ndarray = line, acc: dict = acc) -> float:
            return acc[name][1] - stats.norm.cdf(np.polyval(line, _probit(np.array(acc[name][0]))))
        boots.append(np.mean([er(targets[i]) for i in draws[1][b]]) - np.mean([er(against[i]) for i in draws[2][b]]))
    assert estimate.n_boot == len(boots) and estimate.n_boot_drawn == n_boot
    assert estimate.ci == pytest.approx(tuple(np.quantile(boots, [0.025, 0.975])))
    assert estimate.share_above == pytest.approx(np.mean(np.array(boots) > 0))


def test_without_outcomes_only_models_are_resampled(setting):
    points, _ = setting
    one = er_estimate(points, ["v1"], "dual", n_boot=300)
    assert one.ci[0] <= one.value <= one.ci[1]
    # one placed model, resampled from itself: the interval is the line's uncertainty alone
    assert one.ci[1] - one.ci[0] > 0


def test_round_trip_and_verdict(setting):
    points, outcomes = setting
    estimate = er_estimate(points, ["v0", "v1", "v2"], "dual", n_boot=200, outcomes=outcomes)
    assert ErEstimate.from_dict(estimate.to_dict()) == estimate
    above = ErEstimate(["a"], [], "dual", 0.1, (0.02, 0.2), 1.0, 10, 10, 0.95)
    assert above.verdict == "above" and ErEstimate(["a"], [], "d", -0.1, (-0.2, -0.01), 0.0, 9, 9, 0.95).verdict == "below"
    assert ErEstimate(["a"], [], "d", 0.0, (-0.1, 0.1), 0.5, 9, 9, 0.95).verdict == "indistinguishable"


def test_bad_input_is_named(setting):
    points, outcomes = setting
    with pytest.raises(DataError, match="unknown \\['nope'\\]"):
        er_estimate(points, ["nope"], "dual")
    with pytest.raises(DataError, match="family 'vlm2' has 0 model"):
        er_estimate(points, ["v0"], "vlm2")
    with pytest.raises(DataError, match="no per-question outcomes"):
        er_estimate(points, ["v0"], "dual", outcomes={k: v for k, v in outcomes.items() if k != "v0"})
