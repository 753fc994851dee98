"""The robustness demo's verdict on a fit: near-chance models flag a fit to noise, a poor r^2 says so."""

from __future__ import annotations

from robustvlm.analysis.accuracy_on_the_line import (
    LineBand,
    LineFit,
    ModelPoint,
    ModelRobustness,
    RobustnessFit,
)
from robustvlm.experiments.robustness.verdict import fit_verdict, robustness_verdict


def test_verdict_flags_near_chance_even_with_high_r2():
    fit = LineFit(slope=0.9, intercept=0.0, r2=0.95, n=2)

    def models(*acc_refs):
        return [ModelRobustness(ModelPoint("m", "f", a, 0.5, 10, 10), True, (0, 1), (0, 1), 0.0) for a in acc_refs]

    near, learned = models(0.22, 0.25), models(0.5, 0.8)
    assert "fits noise" in fit_verdict(fit, near, chance=0.2)
    assert fit_verdict(fit, learned, chance=0.2).startswith("r^2 0.95")
    assert "poor fit" in fit_verdict(LineFit(0.9, 0.0, 0.1, 2), learned, chance=0.2)


def test_the_demo_verdict_reads_each_fit_and_the_models_off_the_line():
    # predicted shifted accuracy = acc_shift - ER: a 0.50 (interval 0.45-0.55, ER +0.10: line at 0.40) is above it;
    # b 0.30 (0.20-0.40, ER -0.05: line at 0.35) is on it; c 0.20 (0.15-0.25, ER -0.10: line at 0.30) below
    models = [ModelRobustness(ModelPoint(name, "f", ref, shift, 100, 100), True, (0, 1), ci, er)
              for name, ref, shift, ci, er in [("a", 0.9, 0.5, (0.45, 0.55), 0.10), ("b", 0.7, 0.3, (0.2, 0.4), -0.05),
                                               ("c", 0.5, 0.2, (0.15, 0.25), -0.10)]]
    fit = RobustnessFit("clean", "noisy", None, LineFit(0.8, -0.5, 0.9, 3), LineBand([], [], [], 0.95, 0, 0), models)
    lines = robustness_verdict({"noisy": fit}, reference="clean", chance=0.25)
    assert lines[0].startswith("Every model here is trained with ERM, so no method is compared")
    assert lines[1] == ("`noisy`: mean accuracy 33.3 against 70.0 on `clean` (-36.7 points over 3 models); r^2 0.90; "
                        "slope 0.80 < 1; effective robustness from -10.0 to +10.0 points (largest: `a`); above the "
                        "line beyond their 95% interval: a; below it: c.")
