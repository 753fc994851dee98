"""Family lines and the lift between them, against direct computations and a direct bootstrap."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from robustvlm.analysis.accuracy_on_the_line import ModelPoint
from robustvlm.analysis.task_signal import Lift, family_lines, lift_between, matched_reference
from robustvlm.errors import DataError


def _family(name: str, refs, slope: float, intercept: float, noise: float, seed: int) -> list[ModelPoint]:
    rng = np.random.default_rng(seed)
    z = stats.norm.ppf(refs)
    shifted = stats.norm.cdf(slope * z + intercept + noise * rng.normal(size=len(refs)))
    return [ModelPoint(f"{name}{i}", name, float(r), float(s), 500, 500) for i, (r, s) in enumerate(zip(refs, shifted))]


@pytest.fixture
def points():
    return (_family("vqa", [0.4, 0.5, 0.6, 0.7, 0.8], 0.9, 0.1, 0.05, 1)
            + _family("caption", [0.35, 0.45, 0.55, 0.65, 0.75, 0.85], 0.9, -0.3, 0.05, 2))


def _line(members):
    return np.polyfit(stats.norm.ppf([p.acc_ref for p in members]), stats.norm.ppf([p.acc_shift for p in members]), 1)


def test_lines_and_lift_match_a_direct_computation(points):
    lines = family_lines(points)
    for family in ("vqa", "caption"):
        slope, intercept = _line([p for p in points if p.family == family])
        assert lines[family].slope == pytest.approx(slope) and lines[family].intercept == pytest.approx(intercept)
    lift = lift_between(points, "vqa", "caption", n_boot=500)
    x = stats.norm.cdf(np.mean(stats.norm.ppf([p.acc_ref for p in points])))
    assert lift.at_ref == pytest.approx(x) == pytest.approx(matched_reference(points[:5], points[5:]))
    a, b = _line(points[:5]), _line(points[5:])
    z = stats.norm.ppf(x)
    assert lift.lift == pytest.approx(stats.norm.cdf(a[0] * z + a[1]) - stats.norm.cdf(b[0] * z + b[1]))
    assert lift.verdict == "above" and lift.ci[0] > 0 and not lift.extrapolated


def test_a_lift_round_trips_through_json(points):
    lift = lift_between(points, "vqa", "caption", n_boot=100)
    written = json.loads(json.dumps(lift.to_dict()))
    assert written["ci"] == list(lift.ci) and written["extrapolated"] is False
    assert Lift.from_dict(written) == lift


def test_bootstrap_interval_equals_a_direct_bootstrap(points):
    """The documented draw order, refitting with numpy's polyfit one resample at a time."""
    vqa, caption = points[:5], points[5:]
    got = lift_between(points, "vqa", "caption", n_boot=400, seed=7)
    rng = np.random.default_rng(7)
    ia, ib = rng.integers(0, 5, (400, 5)), rng.integers(0, 6, (400, 6))
    z = stats.norm.ppf(got.at_ref)
    lifts = []
    for ra, rb in zip(ia, ib):
        if len(set(ra)) < 2 or len(set(rb)) < 2:
            continue  # one model drawn again and again: no line
        (sa, ca), (sb, cb) = _line([vqa[i] for i in ra]), _line([caption[i] for i in rb])
        lifts.append(stats.norm.cdf(sa * z + ca) - stats.norm.cdf(sb * z + cb))
    assert got.n_boot == len(lifts)
    assert got.ci == pytest.approx(tuple(np.quantile(lifts, [0.025, 0.975])), abs=1e-9)
    assert got.share_above == pytest.approx(np.mean(np.array(lifts) > 0))


def test_same_line_gives_an_interval_around_zero():
    same = (_family("vqa", [0.4, 0.5, 0.6, 0.7, 0.8], 0.8, 0.0, 0.08, 3)
            + _family("caption", [0.45, 0.55, 0.65, 0.75], 0.8, 0.0, 0.08, 4))
    lift = lift_between(same, "vqa", "caption", n_boot=1000)
    assert lift.verdict == "indistinguishable" and lift.ci[0] < 0 < lift.ci[1]


def test_extrapolation_is_flagged_and_small_families_refused(points):
    assert lift_between(points, "vqa", "caption", at_ref=0.95, n_boot=100).extrapolated
    with pytest.raises(DataError, match="at least 2"):
        lift_between(points[:6], "vqa", "caption")


def _family_with_outcomes(name: str, refs, slope: float, intercept: float, n: int, seed: int):
    """Models whose accuracies are the means of per-question outcomes on n shared questions."""
    rng = np.random.default_rng(seed)
    points, outcomes = [], {}
    for i, r in enumerate(refs):
        s = stats.norm.cdf(slope * stats.norm.ppf(r) + intercept)
        ref_out, shift_out = rng.random(n) < r, rng.random(n) < s
        outcomes[f"{name}{i}"] = (ref_out, shift_out)
        points.append(ModelPoint(f"{name}{i}", name, float(ref_out.mean()), float(shift_out.mean()), n, n))
    return points, outcomes


def test_question_resampling_equals_a_direct_two_level_bootstrap():
    a, oa = _family_with_outcomes("vqa", [0.4, 0.55, 0.7, 0.8], 0.9, 0.2, 60, 5)
    b, ob = _family_with_outcomes("caption", [0.35, 0.5, 0.65, 0.85], 0.9, -0.2, 60, 6)
    outcomes = {**oa, **ob}
    got = lift_between(a + b, "vqa", "caption", n_boot=300, seed=3, outcomes=outcomes)
    rng = np.random.default_rng(3)
    ia, ib = rng.integers(0, 4, (300, 4)), rng.integers(0, 4, (300, 4))
    qr, qs = rng.integers(0, 60, (300, 60)), rng.integers(0, 60, (300, 60))
    z = stats.norm.ppf(got.at_ref)
    clip = lambda acc: np.clip(acc, 1e-4, 1 - 1e-4)  # noqa: E731 - the transform's clipping
    lifts = []
    for row in range(300):
        lines = []
        for fam, idx in ((a, ia[row]), (b, ib[row])):
            x = [clip(outcomes[fam[i].model][0][qr[row]].mean()) for i in idx]
            y = [clip(outcomes[fam[i].model][1][qs[row]].mean()) for i in idx]
            lines.append(None if len(set(x)) < 2 else np.polyfit(stats.norm.ppf(x), stats.norm.ppf(y), 1))
        if all(line is not None for line in lines):
            (sa, ca), (sb, cb) = lines
            lifts.append(stats.norm.cdf(sa * z + ca) - stats.norm.cdf(sb * z + cb))
    assert got.n_boot == len(lifts)
    assert got.ci == pytest.approx(tuple(np.quantile(lifts, [0.025, 0.975])), abs=1e-9)
    models_only = lift_between(a + b, "vqa", "caption", n_boot=300, seed=3)
    assert got.lift == models_only.lift and got.ci != models_only.ci
    bad = {**outcomes, "vqa0": (outcomes["vqa0"][0][::-1] * 0, outcomes["vqa0"][1])}
    with pytest.raises(DataError, match="do not give the models' acc_ref"):
        lift_between(a + b, "vqa", "caption", n_boot=50, outcomes=bad)
