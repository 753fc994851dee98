"""The reward matrices' pair-by-pair comparison (`experiments.reward.paired`) against statsmodels'
cluster-robust OLS and scipy computed by hand on hand-written runs, and its verdict sentence."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from robustvlm.analysis.paired import compare_paired
from robustvlm.analysis.reward_matrix import MatrixRun
from robustvlm.experiments.reward.paired import reward_paired
from robustvlm.experiments.reward.verdict import reward_verdict

RNG = np.random.default_rng(3)
ENVS = ("long", "plain")
PAIRS = {env: [f"{env}-{i}" for i in range(25)] for env in ENVS}
SEEDS = (0, 1)


def _run(label: str, seed: int, train_env: str, p: float) -> MatrixRun:
    rows = []
    for env, ids in PAIRS.items():
        for pid in ids:
            right = RNG.random() < p
            rows.append({"id": pid, "env": env, "multimodal": [1.0, 0.0] if right else [0.0, 0.0 if RNG.random() < 0.2
                                                                                          else 1.0]})
    return MatrixRun(label, seed, train_env, rows, "multimodal")


RUNS = [_run(label, seed, env, p) for label, p in (("standard", 0.55), ("shortcut_aware", 0.7))
        for seed in SEEDS for env in ENVS]


def _ood_scores(label: str) -> tuple[list[str], list[str], np.ndarray]:
    """(question ids, their test pairs, seed-averaged o.o.d. correctness) in the order of the ids."""
    keys = sorted(f"{env}>{pid}" for env in ENVS for test in ENVS if test != env for pid in PAIRS[test])
    by = {(r.seed, r.train_env): r.correct() for r in RUNS if r.label == label}
    scores = np.array([np.mean([by[s, k.split(">")[0]][k.split(">")[1]] for s in SEEDS]) for k in keys])
    return keys, [k.split(">")[1] for k in keys], scores


def test_ood_questions_pooled_over_seeds_and_clustered_by_test_pair():
    verdict = reward_paired(RUNS, "standard", "shortcut_aware", n_boot=300)
    assert set(verdict) == {"iid", "ood", "all"}
    keys, clusters, a = _ood_scores("shortcut_aware")
    _, _, b = _ood_scores("standard")
    c = verdict["ood"].paired.comparison
    assert c == compare_paired(a, b, clusters=clusters, n_boot=300, power_delta=c.power_delta)
    assert c.n == len(keys) == 50 and c.clusters == 50  # each o.o.d. pair scored by one other env here
    fit = sm.OLS(a - b, np.ones(len(keys))).fit(cov_type="cluster", cov_kwds={"groups": np.unique(clusters,
                                                                               return_inverse=True)[1]})
    assert c.se == pytest.approx(float(fit.bse[0]))
    for seed in SEEDS:  # a tie counts as wrong, as in accuracy
        x = np.array([RUNS[i].correct()[k.split(">")[1]] for k in keys for i, r in enumerate(RUNS)
                      if r.label == "shortcut_aware" and r.seed == seed and r.train_env == k.split(">")[0]])
        y = np.array([RUNS[i].correct()[k.split(">")[1]] for k in keys for i, r in enumerate(RUNS)
                      if r.label == "standard" and r.seed == seed and r.train_env == k.split(">")[0]])
        only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
        assert verdict["ood"].paired.seed_mcnemar[str(seed)] == (
            only_a, only_b, pytest.approx(stats.binomtest(only_a, only_a + only_b).pvalue))


def test_the_verdict_states_the_paired_test_and_its_caveat():
    paired = reward_paired(RUNS, "standard", "shortcut_aware", n_boot=300)
    ood = paired["ood"].to_dict()
    seedwise = {"mean": 0.1, "std": 0.01, "values": [0.09, 0.11], "wins": 2, "n": 2}
    comparison = {"ood": seedwise, "sfd": {**seedwise, "mean": -0.1, "values": [-0.1, -0.1], "wins": 0},
                  "iid": None, "paired": {"ood": ood}}
    lines = reward_verdict(comparison)
    assert any(line.startswith("Pair by pair (o.o.d.") and f"{100 * ood['difference']:+.1f} points" in line
               for line in lines)
    noisy = {**ood, "ci_lo": -0.01, "ci_hi": 0.05}
    assert "within the test set's own noise" in reward_verdict({**comparison, "paired": {"ood": noisy}})[-1]
    assert "within the test set's own noise" not in reward_verdict({**comparison, "paired": {
        "ood": {**ood, "ci_lo": 0.01, "ci_hi": 0.05}}})[-1]
    assert reward_paired([r for r in RUNS if r.label == "standard"], "standard", "shortcut_aware") == {}
