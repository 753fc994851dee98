"""Powered verdicts (analysis.power) against independent computations: scipy's t interval,
statsmodels' TTestPower, and brute-force simulation of the interval."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import TTestPower

from robustvlm.analysis import power as pw
from robustvlm.errors import DataError


def _simulated(sd: float, units: int, margin: float | None, difference: float, reps: int = 200_000) -> float:
    """The share of simulated paired t intervals (normal differences) that are decided: inside
    ±margin (margin given) or excluding zero."""
    rng = np.random.default_rng(0)
    d = rng.normal(difference, sd, size=(reps, units))
    mean, half = d.mean(axis=1), stats.t.ppf(0.975, units - 1) * d.std(axis=1, ddof=1) / math.sqrt(units)
    decided = (np.abs(mean) + half < margin) if margin is not None else (np.abs(mean) > half)
    return float(decided.mean())


def test_half_width_is_scipys_t_interval():
    values = np.array([1.5, 0.8, 1.7, -0.2])
    lo, hi = stats.t.interval(0.95, values.size - 1, loc=values.mean(), scale=stats.sem(values))
    assert pw.half_width(values.std(ddof=1), values.size) == pytest.approx((hi - lo) / 2, rel=1e-12)


@pytest.mark.parametrize(("difference", "sd", "units"), [(1.3, 0.47, 3), (1.0, 4.3, 20), (-0.5, 2.0, 40)])
def test_power_to_separate_is_statsmodels_ttest_power(difference, sd, units):
    expected = TTestPower().power(effect_size=abs(difference) / sd, nobs=units, alpha=0.05)
    assert pw.power_to_separate(difference, sd, units) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(("difference", "sd"), [(1.3, 0.47), (1.0, 4.3), (0.011, 0.22)])
def test_units_to_separate_is_statsmodels_solve_power_rounded_up(difference, sd):
    solved = TTestPower().solve_power(effect_size=difference / sd, alpha=0.05, power=0.8)
    assert pw.units_to_separate(difference, sd) == max(2, math.ceil(solved))


@pytest.mark.parametrize(("margin", "sd", "units", "difference"), [(1.0, 0.47, 3, 0.0), (2.0, 1.0, 4, 0.0),
                                                                   (2.0, 1.0, 6, 0.5), (1.0, 2.0, 30, 0.0)])
def test_power_to_bound_matches_simulation(margin, sd, units, difference):
    computed = pw.power_to_bound(margin, sd, units, difference=difference)
    assert computed == pytest.approx(_simulated(sd, units, margin, difference), abs=0.004)


def test_units_to_bound_is_the_first_design_at_power_and_the_normal_answer_for_many_units():
    n = pw.units_to_bound(1.0, 0.47)
    assert pw.power_to_bound(1.0, 0.47, n) >= 0.8 > pw.power_to_bound(1.0, 0.47, n - 1)
    # many units: the interval +-1.96 se must sit inside the margin with P(|Z| < m/se - 1.96) = 0.8
    normal = (22.35 * (stats.norm.ppf(0.975) + stats.norm.ppf(0.9)) / 1.0) ** 2
    assert pw.units_to_bound(1.0, 22.35) == pytest.approx(normal, rel=0.01)
    assert pw.units_to_bound(1.0, 1.0, difference=1.2) is None  # a true effect beyond the margin


def test_separation_design_reaches_its_power_in_simulation():
    n = pw.units_to_separate(1.0, 1.5)
    assert _simulated(1.5, n, None, 1.0, reps=100_000) == pytest.approx(pw.power_to_separate(1.0, 1.5, n), abs=0.005)
    assert pw.units_to_separate(0.0, 1.0) is None


def test_two_level_spread_splits_training_noise_from_example_noise():
    spread = pw.Spread(sd=4.27, examples=480, example_sd=70.0)
    assert spread.seed_sd(480) == pytest.approx(4.27)
    assert spread.training_sd == pytest.approx(math.sqrt(4.27**2 - 70.0**2 / 480))
    assert spread.seed_sd(10**9) == pytest.approx(spread.training_sd, abs=1e-3)
    assert pw.examples_to_separate(0.97, spread, 3) is None  # 3 seeds of training noise alone cannot
    wide = pw.Spread(sd=3.3, examples=480, example_sd=70.0)  # mostly example noise
    n = pw.examples_to_separate(2.0, wide, 10)
    power_at = TTestPower().power  # the design's seed-level t test at sd seed_sd(n)
    assert power_at(effect_size=2.0 / wide.seed_sd(n), nobs=10, alpha=0.05) >= 0.8
    assert power_at(effect_size=2.0 / wide.seed_sd(n - 1), nobs=10, alpha=0.05) < 0.8


def test_claim_from_its_printed_interval_has_the_interval_spread():
    claim = pw.Claim.from_values("x", [1.5, 0.8, 1.7])
    h = pw.half_width(claim.sd, 3)
    again = pw.Claim.from_interval("x", claim.difference, claim.difference - h, claim.difference + h, 3, "seeds")
    assert again.sd == pytest.approx(claim.sd)
    with pytest.raises(DataError, match="must be wider"):
        pw.Claim.from_interval("x", 2.0, 0.3, 1.9, 100)


def test_bad_spreads_are_refused_in_one_line():
    with pytest.raises(DataError, match="positive"):
        pw.half_width(0.0, 3)
    with pytest.raises(DataError, match="at least two finite"):
        pw.Claim.from_values("x", [1.0])


def test_command_prints_the_computation_of_given_numbers(capsys):
    assert pw.main(["--per-seed", "1.5", "0.8", "1.7", "--margin", "1", "--name", "o.o.d."]) == 0
    out = capsys.readouterr().out
    assert "o.o.d.: +1.33 over 3 seeds, sd 0.47: 95% interval [+0.16, +2.51]" in out
    assert f"with 80% power: {pw.units_to_separate(4 / 3, 0.4726)} seeds" in out
    assert "every effect beyond ±1" in out and "half-width at 3, 5, 10, 20 seeds" in out
    assert pw.main(["--interval", "1.1", "0.3", "1.9", "--n", "3000"]) == 0
    assert "over 3000 questions" in capsys.readouterr().out


def _reward_results(ood_values: list[float]) -> dict:
    return {"comparison": {"ood": {"values": ood_values}, "paired": {"ood": {
        "n": 480, "se": 0.01, "difference": 0.013, "ci_lo": -0.007, "ci_hi": 0.033}}}}


def test_command_reads_a_run_folder(tmp_path, capsys):
    (tmp_path / "results.json").write_text(json.dumps(_reward_results([0.015, 0.008, 0.017])))
    assert pw.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "seed by seed: +1.33 over 3 seeds" in out
    assert f"pair by pair pooled over seeds: +1.30 over 480 questions, sd {100 * 0.01 * math.sqrt(480):.2f}" in out
    ladder = {"paired": {"final": {"vlm:full": {"dynamic_birm": {"ood": {"n": 3000, "se": 0.005, "difference": 0.03}}}},
                         "oracle": {}}}
    assert [c.name for c in pw.run_claims(ladder)] == ["vlm:full dynamic_birm minus ERM on ood"]


def test_command_refuses_bad_input_in_one_line(tmp_path, capsys):
    assert pw.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path}/results.json not found: give the output folder of a " \
        "`robustvlm demo reward` or `demo ladder` run"
    (tmp_path / "results.json").write_text(json.dumps({"comparison": {"paired": {"ood": {"n": 480}}}}))
    assert pw.main([str(tmp_path)]) == 2
    assert "not a demo's results (KeyError" in capsys.readouterr().err
    assert pw.main(["--interval", "1", "0", "2"]) == 2
    assert "--interval needs --n" in capsys.readouterr().err


def test_discordant_bound_is_statsmodels_clopper_pearson_and_bounds_any_difference():
    from statsmodels.stats.proportion import proportion_confint

    assert pw.discordant_bound(2, 100) == pytest.approx(proportion_confint(2, 100, method="beta")[1])
    rng = np.random.default_rng(1)  # brute force: |mean(a - b)| never exceeds the discordant share
    a, b = rng.integers(0, 2, size=(2, 1000, 50))
    assert (np.abs((a - b).mean(axis=1)) <= (a != b).mean(axis=1)).all()


def test_examples_to_bound_discordant_reaches_its_power_in_simulation():
    assert pw.examples_to_bound_discordant(0.01) == math.ceil(math.log(0.025) / math.log(0.99))  # 0 of n: 1 - 0.025^(1/n)
    n = pw.examples_to_bound_discordant(0.03, share=0.01)
    counts = np.random.default_rng(2).binomial(n, 0.01, size=100_000)
    uppers = stats.beta.ppf(0.975, counts + 1, n - counts)
    assert 0.8 - 0.005 <= float((uppers < 0.03).mean()) < 0.9  # at power, a discrete count's sawtooth above it
    fewer = np.random.default_rng(3).binomial(n // 2, 0.01, size=100_000)
    assert float((stats.beta.ppf(0.975, fewer + 1, n // 2 - fewer) < 0.03).mean()) < 0.8
    assert pw.examples_to_bound_discordant(0.01, share=0.02) is None


def test_command_bounds_a_claim_of_no_effect_from_its_discordant_count(capsys):
    assert pw.main(["--discordant", "0", "--n", "100", "--margin", "1", "--name", "1-shot gain"]) == 0
    out = capsys.readouterr().out
    assert "0 of 100 questions changed correctness" in out and "within ±3.62" in out and "368 questions" in out
    assert pw.main(["--discordant", "101", "--n", "100"]) == 2
    assert "need 0 <= discordant <= examples" in capsys.readouterr().err


def test_the_ladders_headline_reading_is_the_one_its_results_hold():
    from robustvlm.experiments.ladder.paired_report import HEADLINE_READING
    from robustvlm.experiments.ladder.readings import READINGS

    assert pw.FINAL == HEADLINE_READING == READINGS[0]
