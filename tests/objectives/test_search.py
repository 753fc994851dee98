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
