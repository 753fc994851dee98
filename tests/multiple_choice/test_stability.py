"""Accuracy against the number of sampled questions: the hypergeometric spread and a brute force."""

import math
from itertools import combinations

import numpy as np
import pytest

from robustvlm.multiple_choice.stability import accuracy_vs_size


def _hypergeometric_std(n_correct: int, n: int, m: int) -> float:
    p = n_correct / n
    return math.sqrt(p * (1 - p) / m * (n - m) / (n - 1))


def test_accuracy_vs_size_matches_hypergeometric_spread():
    rng = np.random.default_rng(1)
    correct = rng.random(400) < 0.7
    rows = accuracy_vs_size(correct, sizes=(50, 200, 1000), n_draws=4000, seed=3)
    assert [r["size"] for r in rows] == [50, 200, 400]
    for row in rows[:2]:
        std = _hypergeometric_std(int(correct.sum()), 400, row["size"])
        assert row["std"] == pytest.approx(std, rel=0.06)
        assert row["mean"] == pytest.approx(correct.mean(), abs=3 * std / math.sqrt(4000))
        assert row["lo"] < row["mean"] < row["hi"]
    assert rows[-1] == {"size": 400, "mean": correct.mean(), "std": 0.0, "lo": correct.mean(), "hi": correct.mean()}


def test_accuracy_vs_size_small_case_by_brute_force():
    correct = [True, False, True, True, False, False, True]
    exact = [np.mean([correct[i] for i in subset]) for subset in combinations(range(7), 3)]
    row = accuracy_vs_size(correct, sizes=(3,), n_draws=20000, seed=0)[0]
    assert row["mean"] == pytest.approx(np.mean(exact), abs=0.01)
    assert row["std"] == pytest.approx(np.std(exact), rel=0.03)
