"""Reward statistics against independent computations: accuracy with ties, the bootstrap CI,
SFD, length statistics, matrix averages, paired differences, and the Best-of-N estimator
against brute-force enumeration of every subset."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from robustvlm.analysis.reward import (
    best_of_n,
    best_of_n_curve,
    length_balanced_subset,
    length_shares,
    matrix_averages,
    paired_difference,
    pairwise_accuracy,
    seed_spread,
    shortcut_failure_degradation,
    summarize_pair_rows,
)
from robustvlm.errors import DataError


def test_accuracy_counts_ties_apart_and_the_ci_is_the_percentile_bootstrap():
    chosen = [1.0, 2.0, 0.5, 3.0, 3.0, -1.0]
    rejected = [0.0, 2.0, 0.7, 1.0, 3.0, -2.0]
    acc = pairwise_accuracy(chosen, rejected, n_boot=400, seed=3)
    assert acc.accuracy == pytest.approx(3 / 6) and acc.ties == pytest.approx(2 / 6) and acc.n == 6
    # the interval, recomputed by hand: resample the 0/1 outcomes with the same generator
    correct = np.array([1, 0, 0, 1, 0, 1], dtype=float)
    rng = np.random.default_rng(3)
    means = [correct[rng.integers(0, 6, 6)].mean() for _ in range(400)]
    assert (acc.ci_lo, acc.ci_hi) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    with pytest.raises(DataError, match="equally many"):
        pairwise_accuracy([1.0], [1.0, 2.0])


def test_sfd_is_accuracy_on_proxy_successes_minus_on_failures():
    main = [True, True, False, True, False, False, True]
    proxy = [True, True, True, False, False, False, True]
    result = shortcut_failure_degradation(main, proxy)
    success = [m for m, p in zip(main, proxy) if p]
    fail = [m for m, p in zip(main, proxy) if not p]
    assert result.acc_success == pytest.approx(sum(success) / len(success))
    assert result.acc_fail == pytest.approx(sum(fail) / len(fail))
    assert result.sfd == pytest.approx(3 / 4 - 1 / 3) and (result.n_success, result.n_fail) == (4, 3)
    assert shortcut_failure_degradation([True, False], [True, True]).sfd is None  # no failure subset


def test_length_shares_and_a_balanced_subset():
    chosen = ["a b c", "a b", "a", "a b c d", "a b"]
    rejected = ["a", "a b c", "b", "a", "c"]
    assert length_shares(chosen, rejected) == {"chosen_longer": 0.6, "chosen_shorter": 0.2, "equal": 0.2}
    keep = length_balanced_subset(chosen, rejected, seed=0)
    lengths = [(len(chosen[i].split()), len(rejected[i].split())) for i in keep]
    assert sum(c > r for c, r in lengths) == sum(c < r for c, r in lengths) == 1
    assert 2 in keep  # the equal-length pair is always kept


def test_matrix_averages_and_paired_seed_differences():
    cells = {("a", "a"): 0.9, ("b", "b"): 0.8, ("a", "b"): 0.5, ("b", "a"): 0.6}
    assert matrix_averages(cells) == {"iid": pytest.approx(0.85), "ood": pytest.approx(0.55)}
    a, b = seed_spread([0.5, 0.6, 0.7]), seed_spread([0.6, 0.55, 0.9])
    diff = paired_difference(a, b)
    assert diff["values"] == pytest.approx([0.1, -0.05, 0.2]) and diff["wins"] == 2
    assert diff["mean"] == pytest.approx(np.mean([0.1, -0.05, 0.2]))
    assert diff["std"] == pytest.approx(np.std([0.1, -0.05, 0.2], ddof=1))
    assert seed_spread([0.4])["std"] is None


def brute_force_best_of_n(rewards, gold, n):
    """Average gold of the pick over every n-subset; ties go to the lower index (Python's max)."""
    picks = [max(subset, key=lambda i: (rewards[i], -i)) for subset in itertools.combinations(range(len(rewards)), n)]
    return float(np.mean([gold[i] for i in picks]))


@pytest.mark.parametrize("seed", range(4))
def test_best_of_n_equals_brute_force_enumeration(seed):
    rng = np.random.default_rng(seed)
    k = 9
    rewards = rng.integers(0, 4, k).astype(float)  # many ties
    gold = rng.random(k)
    for n in range(1, k + 1):
        assert best_of_n(rewards, gold, n) == pytest.approx(brute_force_best_of_n(rewards, gold, n), abs=1e-12)
    assert best_of_n(rewards, gold, 1) == pytest.approx(gold.mean())  # N = 1: a random candidate
    top = max(range(k), key=lambda i: (rewards[i], -i))
    assert best_of_n(rewards, gold, k) == pytest.approx(gold[top])  # N = K: the best-rewarded one


def test_best_of_n_curve_averages_prompts_and_checks_its_input():
    curve = best_of_n_curve([[0.1, 0.9], [0.5, 0.2]], [[0.0, 1.0], [1.0, 0.0]], [1, 2])
    assert curve == [{"n": 1, "mean": 0.5, "n_prompts": 2}, {"n": 2, "mean": 1.0, "n_prompts": 2}]
    with pytest.raises(DataError, match="n must lie in 1..2"):
        best_of_n([0.1, 0.2], [0.0, 1.0], 3)
    with pytest.raises(DataError, match="one gold score per candidate"):
        best_of_n([0.1, 0.2], [0.0], 1)


def test_summarize_rows_per_environment_and_view():
    rows = [{"id": "1", "env": "a", "multimodal": [1.0, 0.0], "drop": [0.0, 1.0]},
            {"id": "2", "env": "a", "multimodal": [0.0, 1.0], "drop": [0.0, 1.0]},
            {"id": "3", "env": "b", "multimodal": [2.0, 1.0], "drop": [1.0, 1.0]}]
    metrics = summarize_pair_rows(rows, ["multimodal", "drop"], "multimodal", n_boot=100)
    assert metrics.per_env["a"]["multimodal"].accuracy == 0.5 and metrics.per_env["b"]["drop"].ties == 1.0
    assert metrics.overall["multimodal"].accuracy == pytest.approx(2 / 3)
    assert type(metrics).from_dict(metrics.to_dict()) == metrics
