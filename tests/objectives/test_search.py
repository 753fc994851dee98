"""Hyperparameter draws from the objectives' declared search ranges."""

from __future__ import annotations

import numpy as np
import pytest

from robustvlm.errors import ConfigError
from robustvlm.objectives import REGISTRY
from robustvlm.objectives.search import sample_hparams, sample_value


def test_search_draws_stay_in_their_declared_ranges():
    rng = np.random.default_rng(0)
    assert sample_value(("choice", "a", "b"), rng) in ("a", "b")
    for _ in range(50):
        assert 1e-3 <= sample_value(("log", 1e-3, 1e2), rng) <= 1e2
        v = sample_value(("int_log", 1, 500), rng)
        assert isinstance(v, int) and 1 <= v <= 500
    with pytest.raises(ConfigError, match="search rule"):
        sample_value(("normal", 0, 1), rng)
    drawn = sample_hparams(REGISTRY["birm"].hparams, rng)
    assert set(drawn) == {k for k, h in REGISTRY["birm"].hparams.items() if h.search is not None}


def test_draw_hparams_draw_zero_is_the_defaults_and_others_are_seeded_per_draw():
    from robustvlm.objectives.search import draw_hparams

    kw = dict(steps=100, optimizer_defaults={"lr": 3e-3}, optimizer_search={"lr": ("log", 1e-4, 1e-2)})
    assert draw_hparams("irm", 0, **kw) == {"lr": 3e-3, "method_args": {}}
    one = draw_hparams("irm", 1, **kw)
    assert one == draw_hparams("irm", 1, **kw) and one != draw_hparams("irm", 2, **kw)
    assert 1e-4 <= one["lr"] <= 1e-2
    assert set(one["method_args"]) == {k for k, h in REGISTRY["irm"].hparams.items() if h.search}
    assert all(1 <= draw_hparams("irm", d, **kw)["method_args"]["anneal_steps"] <= 50 for d in range(1, 20))
    with pytest.raises(ConfigError, match="unknown method"):
        draw_hparams("sgd", 1, **kw)
