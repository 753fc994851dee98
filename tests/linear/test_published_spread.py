"""The default search lands ERM and IRMv1 within the published spread on every example, at settings
other than the default one (README, "Invariance where it is known to work").

`demo invariance` at its default budget (the authors' first 8 draws x 4 data seeds, 1,000 training
rows, their 10,000 full-batch steps and 10,000 validation and test rows per environment), at 2
environments and at 0 spurious dimensions. "Within" is the published mean ± one published standard
deviation over their 50 seeds, give or take their rounding (`linear.published.within_spread`).
About 4 CPU-minutes, on the demo's two worker processes.
"""

from __future__ import annotations

import pytest

from robustvlm.data.synth.linear_unit_tests import EXAMPLES
from robustvlm.experiments.invariance.run import run_invariance_demo

SETTINGS = {"2 environments": {"n_envs": 2}, "0 spurious dimensions": {"dim_spu": 0}}


@pytest.mark.slow
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_erm_and_irmv1_land_within_the_published_spread_on_every_example(setting, tmp_path):
    summary = run_invariance_demo(tmp_path, methods=("erm", "irm"), progress=False, **SETTINGS[setting])
    assert summary.budget == "default" and summary.protocol.steps == 10_000
    verdicts = summary.within_spread
    assert verdicts is not None
    assert {(ex, m) for ex in verdicts for m in verdicts[ex]} == {(ex, m) for ex in EXAMPLES for m in ("erm", "irm")}
    outside = {(example, method): (round(summary.results[example][method].mean, 3), verdict.sds)
               for example, by_method in verdicts.items() for method, verdict in by_method.items()
               if verdict.within is not True}
    assert not outside, f"outside the published spread (or not comparable) at {setting}: {outside}"
