"""The default search lands ERM and IRMv1 within the authors' published spread at two settings
other than the default one (3 environments, 5 + 5 dimensions): 8 spurious dimensions and 2
environments.

The default budget (1,000 training rows, 600 full-batch steps, 10,000 validation and test rows
per environment, 2 data seeds) with 3 of its 4 draws: on these cells the 4-draw runs of README's
table selected one of the first three, so this is that table's figure. "Within" is the published
mean ± one published standard deviation over their 50 seeds (`linear.published.within_spread`).

Asserted: every comparable cell at 8 spurious dimensions (Example2/2s are not comparable there:
their published test split shuffled other columns); at 2 environments IRMv1 on every example and
ERM on all but two, which it misses (README, "Invariance where it is known to work"): Example2
(ours 0.460 against 0.346 ± 0.011: at 600 steps ERM does not read the 100x fainter animal the
published ERM partly reads after 10,000) and Example3 (0.495 against 0.500 ± 0.005).
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from robustvlm.linear.protocol import Protocol, run_one, select
from robustvlm.linear.published import published_row, spread_verdicts

BUDGET = Protocol(n_per_env=1000, n_eval_per_env=10_000, steps=600, n_draws=3, n_seeds=2)
EVERY = ("Example1", "Example1s", "Example2", "Example2s", "Example3", "Example3s")
CASES = {
    "8 spurious dimensions": ({"dim_spu": 8}, {"erm": ("Example1", "Example1s", "Example3", "Example3s"),
                                               "irm": ("Example1", "Example1s", "Example3", "Example3s")}),
    "2 environments": ({"n_envs": 2}, {"erm": ("Example1", "Example1s", "Example2s", "Example3s"), "irm": EVERY}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_erm_and_irmv1_land_within_the_published_spread(case):
    setting, cells = CASES[case]
    protocol = Protocol(**{**asdict(BUDGET), **setting})
    results: dict[str, dict] = {}
    for method, examples in cells.items():
        for example in examples:
            runs = [run_one(example, method, draw, seed, protocol)
                    for draw in range(protocol.n_draws) for seed in range(protocol.n_seeds)]
            results.setdefault(example, {})[method] = asdict(select(runs))
    row = published_row(protocol.n_envs, protocol.dim_inv, protocol.dim_spu)
    verdicts = spread_verdicts(results, row)
    assert sum(len(v) for v in verdicts.values()) == sum(len(e) for e in cells.values())
    outside = {(example, method): (round(results[example][method]["mean"], 3), verdict["sds"])
               for example, by_method in verdicts.items() for method, verdict in by_method.items()
               if not verdict["within"]}
    assert not outside, f"outside the published spread at {case}: {outside}"
