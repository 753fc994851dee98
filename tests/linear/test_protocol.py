"""The unit-test protocol: draws, selection on training-environment validation, one run."""

from __future__ import annotations

import math

import pytest

from robustvlm.errors import ConfigError
from robustvlm.linear.protocol import Protocol, Run, draw_config, run_one, select


def test_draws_are_defaults_first_then_seeded_and_bounded_by_the_run():
    assert draw_config("irm", 0, 100) == {"lr": 1e-3, "weight_decay": 0.0, "method_args": {}}
    for draw in range(1, 20):
        config = draw_config("dynamic_birm", draw, 100)
        assert config == draw_config("dynamic_birm", draw, 100)
        assert 1e-4 <= config["lr"] <= 1e-2 and 1e-6 <= config["weight_decay"] <= 1e-2
        assert 1 <= config["method_args"]["k_skip"] <= 50
        assert 1 <= draw_config("irm", draw, 100)["method_args"]["anneal_steps"] <= 50
    assert draw_config("oracle", 3, 100) == draw_config("erm", 3, 100)


def run(draw, seed, validation, test):
    return Run(draw, seed, {"lr": draw}, validation, test, not all(map(math.isfinite, validation)))


def test_selection_is_the_smallest_seed_mean_validation_error():
    runs = [
        run(0, 0, [1.0, 1.0], [5.0, 7.0]),
        run(0, 1, [1.0, 2.0], [6.0, 8.0]),  # mean sum 2.5
        run(1, 0, [0.5, 1.0], [1.0, 3.0]),
        run(1, 1, [1.0, 1.5], [3.0, 5.0]),  # mean sum 2.0
        run(2, 0, [0.1, 0.1], [0.0, 0.0]),
        run(2, 1, [math.nan, 0.1], [math.nan, 0.0]),
    ]
    chosen = select(runs)
    assert chosen.draw == 1 and chosen.validation == 2.0 and chosen.diverged == 1
    assert chosen.per_env == [2.0, 4.0] and chosen.mean == 3.0
    assert chosen.std == 1.0  # std over seeds of each environment (1, 1), averaged


def test_one_run_uses_its_split_and_the_oracle_sees_shuffled_data():
    protocol = Protocol(n_per_env=100, steps=20, n_draws=1, n_seeds=1)
    ours, oracle = (run_one("Example2", m, 0, 0, protocol) for m in ("erm", "oracle"))
    assert len(ours.validation) == len(ours.test) == 3 and not ours.diverged
    assert ours.validation != oracle.validation and ours.config == oracle.config
    with pytest.raises(ConfigError, match="unknown method"):
        run_one("Example2", "andmask", 0, 0, protocol)
