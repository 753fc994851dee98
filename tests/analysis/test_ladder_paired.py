"""The ladder's paired verdicts (`experiments.ladder.paired`) against scipy / statsmodels computed by
hand on hand-written runs, and the power line against a simulation of the verdict itself."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import TTestPower

from robustvlm.analysis.paired import cluster_bootstrap_ci, compare_paired, questions_needed
from robustvlm.experiments.ladder.paired import (
    PairedVerdict,
    from_bits,
    ladder_paired,
    paired_from_dict,
    paired_to_dict,
    to_bits,
)
from robustvlm.experiments.ladder.readings import COLOUR_FREE, REVERSED

TRAIN = ("train-a", "train-b")
N = 200  # test pictures per environment
RNG = np.random.default_rng(5)


def _evaluation(step: int, val: float, correct: dict[str, np.ndarray]) -> dict:
    return {"step": step, "acc": {**dict.fromkeys(TRAIN, 0.8), **{e: float(c.mean()) for e, c in correct.items()}},
            "val": dict.fromkeys(TRAIN, val), "correct": {e: to_bits(c) for e, c in correct.items()}}


def _run(method: str, seed: int, steps: list[dict[str, np.ndarray]], vals: list[float]) -> dict:
    return {"source": "fashion", "rung": "pixels", "method": method, "seed": seed, "envs": "given",
            "diverged": False, "evaluations": [_evaluation(10 * (i + 1), v, c) for i, (c, v) in enumerate(zip(steps, vals))]}


def _draw(p: float) -> dict[str, np.ndarray]:
    return {env: RNG.random(N) < p for env in (COLOUR_FREE, REVERSED)}


SEEDS = (0, 1, 2)
# three evaluations per run; training-domain validation picks the second (val 0.9)
ERM = {s: [_draw(0.5), _draw(0.5), _draw(0.5)] for s in SEEDS}
NEW = {s: [_draw(0.55), _draw(0.6), _draw(0.5)] for s in SEEDS}
VALS = [0.7, 0.9, 0.8]
RUNS = [_run(m, s, draws[s], VALS) for m, draws in (("erm", ERM), ("dynamic_birm", NEW)) for s in SEEDS]


def test_bits_round_trip():
    correct = RNG.random(37) < 0.5
    assert np.array_equal(from_bits(to_bits(correct)), correct) and set(to_bits(correct)) <= {"0", "1"}


@pytest.mark.parametrize(("reading", "index"), [("final", 2), ("training-domain", 1)])
def test_pooled_over_seeds_matches_scipy_and_statsmodels(reading, index):
    verdicts = ladder_paired(RUNS, TRAIN, reading, n_boot=300)["fashion/pixels"]["dynamic_birm"]
    for env in (COLOUR_FREE, REVERSED):
        a = np.mean([NEW[s][index][env] for s in SEEDS], axis=0)
        b = np.mean([ERM[s][index][env] for s in SEEDS], axis=0)
        order = sorted(range(N), key=str)  # pictures in the order of their ids
        v = verdicts[env]
        assert v.paired.comparison == compare_paired(a[order], b[order], n_boot=300)
        assert v.paired.comparison.se == pytest.approx(stats.sem(a - b))
        won = 0
        for s in SEEDS:
            x, y = NEW[s][index][env], ERM[s][index][env]
            only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
            assert v.paired.seed_mcnemar[str(s)] == (only_a, only_b,
                                                     pytest.approx(stats.binomtest(only_a, only_a + only_b).pvalue))
            won += only_a > only_b
        assert (v.seeds_won, v.seeds) == (won, 3)
        effect = max(abs(a.mean() - b.mean()), 0.01) / np.std(a - b, ddof=1)
        assert v.needed == pytest.approx(TTestPower().solve_power(effect, alpha=0.05, power=0.8), rel=1e-6)
        lo, hi = v.paired.comparison.ci_lo, v.paired.comparison.ci_hi
        assert v.separated == (lo > 0 or hi < 0)


def test_the_oracle_reading_takes_each_environments_own_best_evaluation():
    best = {s: {env: int(np.argmax([ERM[s][i][env].mean() for i in range(3)])) for env in (COLOUR_FREE, REVERSED)}
            for s in SEEDS}
    v = ladder_paired(RUNS, TRAIN, "oracle", n_boot=100)["fashion/pixels"]["dynamic_birm"][REVERSED]
    erm_mean = np.mean([ERM[s][best[s][REVERSED]][REVERSED].mean() for s in SEEDS])
    assert v.paired.comparison.mean_b == pytest.approx(erm_mean)


def test_runs_without_per_picture_answers_are_left_out_and_counted_and_the_oracle_is_not_compared():
    old = [{**r, "evaluations": [{k: x for k, x in e.items() if k != "correct"} for e in r["evaluations"]]}
           for r in RUNS if r["seed"] == 2]
    oracle = [{**r, "method": "oracle"} for r in RUNS if r["method"] == "erm"]
    runs = [r for r in RUNS if r["seed"] != 2] + old + oracle
    verdicts = ladder_paired(runs, TRAIN, "final", n_boot=100)["fashion/pixels"]
    assert list(verdicts) == ["dynamic_birm"]
    assert verdicts["dynamic_birm"][COLOUR_FREE].seeds == 2 and verdicts["dynamic_birm"][COLOUR_FREE].left_out == 2
    assert ladder_paired(old, TRAIN, "final") == {}


def test_results_json_round_trip():
    paired = {"final": ladder_paired(RUNS, TRAIN, "final", n_boot=100)}
    back = paired_from_dict(paired_to_dict(paired))
    assert back == paired and isinstance(back["final"]["fashion/pixels"]["dynamic_birm"][REVERSED], PairedVerdict)


def test_the_power_line_gives_the_verdict_80_percent_power_in_a_simulation():
    """Seeds x pictures as the ladder has them: per seed and picture, only the method right with
    probability 0.12, only ERM with 0.09 (a 3-point margin); the verdict's test (the paired
    bootstrap interval over pictures of the seed-averaged differences) at the number of pictures
    the power line asks for should separate the methods in about 80% of the test sets."""
    p_a, p_b, seeds = 0.12, 0.09, 3
    sd_one = np.sqrt(p_a + p_b - (p_a - p_b) ** 2)  # sd of one seed's per-picture difference
    needed = questions_needed(p_a - p_b, sd_one / np.sqrt(seeds))
    assert needed is not None
    n = int(np.ceil(needed))
    rng = np.random.default_rng(0)
    separated = 0
    sims = 400
    for i in range(sims):
        u = rng.random((seeds, n))
        diff = ((u < p_a).astype(float) - ((u >= p_a) & (u < p_a + p_b))).mean(0)
        lo, hi = cluster_bootstrap_ci(diff, n_boot=400, seed=i)
        separated += lo > 0 or hi < 0
    assert separated / sims == pytest.approx(0.8, abs=0.06)
