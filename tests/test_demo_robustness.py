"""The robustness demo end to end (quick family), checked against independent recomputation."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from scipy.stats import norm

from robustvlm.demo_robustness import (
    QUICK,
    REFERENCE,
    SHIFTS,
    SUITE,
    fit_verdict,
    held_out_indices,
    run_robustness_demo,
)

EPS = 1e-4  # accuracies of exactly 0 or 1 are clipped before the probit


def _probit(acc):
    return norm.ppf(np.clip(np.asarray(acc, dtype=float), EPS, 1 - EPS))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("robustness")
    return out, run_robustness_demo(out, quick=True)


def test_outputs_exist(demo):
    out, _ = demo
    assert (out / "report.md").is_file() and (out / "results.json").is_file()
    for shift in SHIFTS:
        assert (out / "fits" / shift / "fit.json").is_file()
        assert (out / "fits" / shift / "scatter.png").stat().st_size > 1000
        assert f"fits/{shift}/scatter.png" in (out / "report.md").read_text()


def test_every_model_scored_on_every_bench(demo):
    out, summary = demo
    with open(summary["results_csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    pairs = {(r["model"], r["bench"]) for r in rows}
    models = {str(out / "models" / m.name / "final") for m in QUICK.members}
    assert pairs == {(m, b) for m in models for b in (REFERENCE, *SHIFTS)}
    assert len(rows) == len(pairs)
    classes = [d.name for d in (out / "data" / SUITE / REFERENCE).iterdir()]
    held_out = held_out_indices(QUICK.per_class, QUICK.test_fraction, classes)
    n_held_out = sum(len(v) for v in held_out.values())
    assert all(int(r["n"]) == n_held_out for r in rows)


def test_fit_and_effective_robustness_recomputed(demo):
    out, summary = demo
    with open(summary["results_csv"], newline="") as f:
        acc = {(r["model"], r["bench"]): float(r["accuracy"]) for r in csv.DictReader(f)}
    for shift in SHIFTS:
        fit = json.loads((out / "fits" / shift / "fit.json").read_text())
        paths = [m["model"] for m in fit["models"]]
        shifted = np.array([acc[(p, shift)] for p in paths])
        x = _probit([acc[(p, REFERENCE)] for p in paths])
        slope, intercept = np.polyfit(x, _probit(shifted), 1)
        assert fit["fit"]["slope"] == pytest.approx(slope, abs=1e-9)
        assert fit["fit"]["intercept"] == pytest.approx(intercept, abs=1e-9)
        expected = shifted - norm.cdf(slope * x + intercept)
        got = [m["effective_robustness"] for m in fit["models"]]
        np.testing.assert_allclose(got, expected, atol=1e-9)
        reported = {m["model"]: m["effective_robustness"] for m in summary["fits"][shift]["models"]}
        assert set(reported) == {m.name for m in QUICK.members}
        np.testing.assert_allclose(sorted(reported.values()), sorted(got), atol=1e-12)


def test_rerun_resumes_without_changes(demo):
    out, summary = demo
    before = (out / "scores" / "results.csv").read_text()
    again = run_robustness_demo(out, quick=True)
    assert (out / "scores" / "results.csv").read_text() == before
    assert again["fits"] == summary["fits"]


def test_verdict_flags_near_chance_even_with_high_r2():
    fit = {"slope": 0.9, "intercept": 0.0, "r2": 0.95}
    near = [{"acc_ref": 0.22}, {"acc_ref": 0.25}]
    learned = [{"acc_ref": 0.5}, {"acc_ref": 0.8}]
    assert "fits noise" in fit_verdict(fit, near, chance=0.2)
    assert fit_verdict(fit, learned, chance=0.2).startswith("r^2 0.95")
    assert "poor fit" in fit_verdict({**fit, "r2": 0.1}, learned, chance=0.2)
