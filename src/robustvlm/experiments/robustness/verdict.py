"""The robustness demo's verdict: what each accuracy-on-the-line fit says, in plain sentences.

Pure functions on `analysis.accuracy_on_the_line` results. The demo trains one family with ERM, so there is
no method to compare: the verdict reads each shift's line (how much accuracy the shift costs, how
well the line fits, whether it fits noise near chance) and which models sit above or below it by
more than their own 95% interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from robustvlm.analysis.accuracy_on_the_line import LineFit, ModelRobustness, RobustnessFit

R2_POOR = 0.5  # below this the line fit is called poor
NEAR_CHANCE = 0.1  # accuracy within this of chance counts as near chance


def fit_verdict(fit: LineFit, models: Sequence[ModelRobustness], chance: float) -> str:
    """A plain-words reading of one line fit: near-chance models first, then r^2."""
    if max(m.point.acc_ref for m in models) < chance + NEAR_CHANCE:
        return (f"every model is within {100 * NEAR_CHANCE:.0f} points of chance on the reference: the line "
                f"fits noise whatever its r^2 ({fit.r2:.2f}); do not read slope or ER")
    if fit.r2 < R2_POOR:
        return f"poor fit (r^2 {fit.r2:.2f} < {R2_POOR}): the line explains little; read ER with caution"
    return f"r^2 {fit.r2:.2f}; slope {fit.slope:.2f} {'<' if fit.slope < 1 else '>='} 1"


def off_the_line(models: Sequence[ModelRobustness]) -> tuple[list[str], list[str]]:
    """Models whose shifted accuracy's 95% interval lies wholly above / below the line's prediction."""
    above = [m.point.model for m in models if m.ci_shift[0] > m.point.acc_shift - m.effective_robustness]
    below = [m.point.model for m in models if m.ci_shift[1] < m.point.acc_shift - m.effective_robustness]
    return above, below


def robustness_verdict(fits: Mapping[str, RobustnessFit], *, reference: str, chance: float) -> list[str]:
    """The verdict's sentences: one on what is (not) compared, then one per shift."""
    lines = [f"Every model here is trained with ERM, so no method is compared: the verdict reads each shift's "
             f"accuracy-on-the-line fit (probit axes) against `{reference}`; accuracies in %, chance "
             f"{100 * chance:.0f}%."]
    for shift, f in fits.items():
        ref = np.mean([m.point.acc_ref for m in f.models])
        moved = np.mean([m.point.acc_shift for m in f.models])
        ers = {m.point.model: m.effective_robustness for m in f.models}
        best = max(ers, key=lambda k: ers[k])
        above, below = off_the_line(f.models)
        lines.append(
            f"`{shift}`: mean accuracy {100 * moved:.1f} against {100 * ref:.1f} on `{reference}` "
            f"({100 * (moved - ref):+.1f} points over {len(f.models)} models); {fit_verdict(f.fit, f.models, chance)}; "
            f"effective robustness from {100 * min(ers.values()):+.1f} to {100 * ers[best]:+.1f} points (largest: "
            f"`{best}`); above the line beyond their 95% interval: {', '.join(above) or 'none'}; below it: "
            f"{', '.join(below) or 'none'}.")
    return lines
