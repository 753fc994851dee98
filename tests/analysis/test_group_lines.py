"""Group lines and effective robustness against a baseline group's line, checked against an
independent computation: scipy's linregress on norm.ppf-transformed accuracies, resample by
resample for the bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from robustvlm.analysis.accuracy_on_the_line import ModelPoint
from robustvlm.analysis.group_lines import group_lines, place_against


def _points() -> list[ModelPoint]:
    rng = np.random.default_rng(3)
    out = []
    for group, lift, count in (("laion", 0.0, 9), ("openai", 0.25, 6), ("yfcc", -0.3, 5)):
        ref = rng.uniform(0.3, 0.8, count)
        shift = sps.norm.cdf(1.2 * sps.norm.ppf(ref) - 0.4 + lift + rng.normal(0, 0.05, count))
        out += [ModelPoint(f"{group}{i}", group, float(a), float(b), 10_000, 5_000) for i, (a, b) in enumerate(zip(ref, shift))]
    return out


def _er(base: list[ModelPoint], models: list[ModelPoint]) -> float:
    fit = sps.linregress(sps.norm.ppf([p.acc_ref for p in base]), sps.norm.ppf([p.acc_shift for p in base]))
    return float(np.mean([p.acc_shift - sps.norm.cdf(fit.slope * sps.norm.ppf(p.acc_ref) + fit.intercept)
                          for p in models]))


def _scipy_interval(base: list[ModelPoint], models: list[ModelPoint], n_boot: int, seed: int) -> tuple[float, float]:
    """The model-bootstrap interval, refitting with linregress on each resample (er_estimate's draw order)."""
    rng = np.random.default_rng(seed)
    base_idx = rng.integers(0, len(base), size=(n_boot, len(base)))
    model_idx = rng.integers(0, len(models), size=(n_boot, len(models)))
    values = [_er([base[i] for i in b], [models[i] for i in m]) for b, m in zip(base_idx, model_idx)]
    lo, hi = np.quantile(values, [0.025, 0.975])
    return float(lo), float(hi)


def test_group_lines_and_er_against_a_named_baseline_match_scipy():
    points = _points()
    groups = {g.group: g for g in group_lines(points, baseline="laion", n_boot=300, seed=4)}
    base = [p for p in points if p.family == "laion"]
    for name in ("laion", "openai", "yfcc"):
        members = [p for p in points if p.family == name]
        ref = sps.linregress(sps.norm.ppf([p.acc_ref for p in members]), sps.norm.ppf([p.acc_shift for p in members]))
        line = groups[name].line
        assert line is not None
        assert (line.slope, line.intercept, line.r2) == pytest.approx((ref.slope, ref.intercept, ref.rvalue**2))
    assert groups["laion"].er_models is None  # the baseline against itself
    openai = [p for p in points if p.family == "openai"]
    estimate = groups["openai"].er_models
    assert estimate is not None and estimate.value == pytest.approx(_er(base, openai))
    assert estimate.ci == pytest.approx(_scipy_interval(base, openai, 300, 4))
    assert estimate.value > 0.05 and groups["yfcc"].er_models.value < -0.05  # the lifts the data were built with


def test_without_a_baseline_each_group_stands_against_the_others_line():
    points = _points()
    yfcc = next(g for g in group_lines(points, n_boot=200, seed=1) if g.group == "yfcc")
    others = [p for p in points if p.family != "yfcc"]
    members = [p for p in points if p.family == "yfcc"]
    assert yfcc.er_models.value == pytest.approx(_er(others, members))
    assert yfcc.er_models.ci == pytest.approx(_scipy_interval(others, members, 200, 1))


def test_question_counts_add_binomial_redraws_of_every_accuracy():
    points = _points()
    base, mine = points[:9], [ModelPoint("mine", "x", 0.6, 0.5, 200, 100)]
    n_boot = 400
    models_only = place_against(base, mine, n_boot=n_boot, seed=0)
    with_questions = place_against(base, mine, n_boot=n_boot, seed=0, counts=True)
    assert models_only.value == with_questions.value == pytest.approx(_er(base, mine))
    # independently: the same draws in er_estimate's documented order, each resample refitted with linregress
    rng = np.random.default_rng(0)
    base_idx = rng.integers(0, 9, size=(n_boot, 9))
    rng.integers(0, 1, size=(n_boot, 1))
    everyone = [*base, *mine]
    acc = {k: rng.binomial([getattr(p, f"n_{k}") for p in everyone], [getattr(p, f"acc_{k}") for p in everyone],
                           size=(n_boot, 10)) / np.array([getattr(p, f"n_{k}") for p in everyone])
           for k in ("ref", "shift")}
    values = []
    for b in range(n_boot):
        fit = sps.linregress(sps.norm.ppf(acc["ref"][b, base_idx[b]]), sps.norm.ppf(acc["shift"][b, base_idx[b]]))
        values.append(acc["shift"][b, 9] - sps.norm.cdf(fit.slope * sps.norm.ppf(acc["ref"][b, 9]) + fit.intercept))
    assert with_questions.ci == pytest.approx(tuple(np.quantile(values, [0.025, 0.975])))
    # 100 shifted questions at 50%: a binomial sd of 5 points, which dwarfs the line's uncertainty
    assert with_questions.ci[1] - with_questions.ci[0] > 2 * (models_only.ci[1] - models_only.ci[0])
