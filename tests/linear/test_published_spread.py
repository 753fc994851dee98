"""The default search lands where the published figures are on the Example3 cells that it missed
before it took the authors' draws (README, "Invariance where it is known to work").

The default budget (1,000 training rows, 600 full-batch steps, 10,000 validation and test rows per
environment, 4 data seeds). "Within" is the published mean ± one published standard deviation over
their 50 seeds (`linear.published.within_spread`).

- 3 environments, 5 spurious dimensions: ERM on Example3 over the default's 8 draws (the earlier
  2-seed default scored 0.297 against 0.480 ± 0.073: its seed 1 leaves ERM near the invariant rule).
- 0 spurious dimensions: IRMv1 on Example3 and Example3s and ERM on Example3 with the authors' draw 7
  (lr 5.2e-3, weight decay 1.6e-3, the draw their selection kept for IRMv1 on Example3 there), which
  the default's 8 draws include and selected; the earlier default's four draws, all with weight
  decay below 5e-5, left IRMv1 at 0.12-0.15 against 0.013 ± 0.001.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from robustvlm.linear.protocol import Protocol, run_one, select
from robustvlm.linear.published import published_row, spread_verdicts

BUDGET = Protocol(n_per_env=1000, n_eval_per_env=10_000, steps=600, n_draws=8, n_seeds=4)
CASES = {
    "3 environments": ({}, range(8), {"erm": ("Example3",)}),
    "0 spurious dimensions": ({"dim_spu": 0}, (7,), {"erm": ("Example3",), "irm": ("Example3", "Example3s")}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_erm_and_irmv1_land_within_the_published_spread(case):
    setting, draws, cells = CASES[case]
    protocol = Protocol(**{**asdict(BUDGET), **setting})
    results: dict[str, dict] = {}
    for method, examples in cells.items():
        for example in examples:
            runs = [run_one(example, method, draw, seed, protocol) for draw in draws for seed in range(protocol.n_seeds)]
            results.setdefault(example, {})[method] = asdict(select(runs))
    row = published_row(protocol.n_envs, protocol.dim_inv, protocol.dim_spu)
    verdicts = spread_verdicts(results, row)
    assert sum(len(v) for v in verdicts.values()) == sum(len(e) for e in cells.values())
    outside = {(example, method): (round(results[example][method]["mean"], 3), verdict["sds"])
               for example, by_method in verdicts.items() for method, verdict in by_method.items()
               if not verdict["within"]}
    assert not outside, f"outside the published spread at {case}: {outside}"
