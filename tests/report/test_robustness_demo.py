"""The robustness demo's verdict on a fit: near-chance models flag a fit to noise, a poor r^2 says so."""

from __future__ import annotations

from robustvlm.analysis.robustness import LineFit, ModelPoint, ModelRobustness
from robustvlm.report.robustness_demo import fit_verdict


def test_verdict_flags_near_chance_even_with_high_r2():
    fit = LineFit(slope=0.9, intercept=0.0, r2=0.95, n=2)

    def models(*acc_refs):
        return [ModelRobustness(ModelPoint("m", "f", a, 0.5, 10, 10), True, (0, 1), (0, 1), 0.0) for a in acc_refs]

    near, learned = models(0.22, 0.25), models(0.5, 0.8)
    assert "fits noise" in fit_verdict(fit, near, chance=0.2)
    assert fit_verdict(fit, learned, chance=0.2).startswith("r^2 0.95")
    assert "poor fit" in fit_verdict(LineFit(0.9, 0.0, 0.1, 2), learned, chance=0.2)
