"""The default search lands ERM and IRMv1 within the authors' published spread at two settings
other than the default one (3 environments, 5 + 5 dimensions): 0 and 1 spurious dimensions.

Quick settings: the authors' search ranges and selection, 3 draws x 2 data seeds, 1,000 training
rows, 400 full-batch steps, 10,000 validation and test rows per environment. "Within" is their
mean ± one standard deviation over their 50 seeds (`linear.published.within_spread`).

Asserted: every cell these settings reach (measured: README, "Invariance where it is known to
work"). Not reached at 400 steps, so not asserted: IRMv1 on Example3 and Example3s (0.21-0.33
against the published 0.01-0.05: the penalty holds f(x) near 0 while the 0.1-scaled inputs need
thousands of steps; the authors ran 10,000) and ERM on Example3s (0.019 against 0.013 ± 0.001 at
0 spurious dimensions; 0.32 against 0.11 ± 0.18 at 1). Example2/2s are not comparable at these
settings (their published test split shuffled other columns; `linear.published`).
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from robustvlm.linear.protocol import Protocol, run_one, select
from robustvlm.linear.published import published_row, spread_verdicts

QUICK = Protocol(n_per_env=1000, n_eval_per_env=10_000, steps=400, n_draws=3, n_seeds=2)
REACHED = {"Example1": ("erm", "irm"), "Example1s": ("erm", "irm"), "Example3": ("erm",)}


@pytest.mark.slow
@pytest.mark.parametrize("dim_spu", [0, 1])
def test_erm_and_irmv1_land_within_the_published_spread(dim_spu):
    protocol = Protocol(**{**asdict(QUICK), "dim_spu": dim_spu})
    results = {
        example: {
            method: asdict(select([run_one(example, method, draw, seed, protocol)
                                   for draw in range(protocol.n_draws) for seed in range(protocol.n_seeds)]))
            for method in methods
        }
        for example, methods in REACHED.items()
    }
    row = published_row(protocol.n_envs, protocol.dim_inv, dim_spu)
    verdicts = spread_verdicts(results, row)
    outside = {(example, method): (results[example][method]["mean"], verdict["sds"])
               for example, by_method in verdicts.items() for method, verdict in by_method.items()
               if not verdict["within"]}
    assert not outside, f"outside the published spread at {dim_spu} spurious dimensions: {outside}"
