"""Study aggregation by hand: per-method summaries with their bootstrap intervals, per-env means,
paired tests matched by example id, and Table 1 built from the aggregate."""

from __future__ import annotations

import numpy as np
import pytest

import robustvlm.analysis.study as aggregation
from robustvlm.analysis.stats import paired_bootstrap_test
from robustvlm.report.study_report import table1


def _row(ex_id, env, ood, chrf, exact=None):
    scores = {"chrf": chrf} if exact is None else {"chrf": chrf, "exact": exact}
    return {
        "id": ex_id,
        "env": env,
        "ood": ood,
        "scores": scores,
        "prediction": "p",
        "target": "t",
        "instruction": "q",
    }


# Two seeds; ID envs a (2 examples) and b (1 example); OOD env c (2 examples).
SEED_ROWS = {
    0: [
        _row("a1", "a", False, 0.2),
        _row("a2", "a", False, 0.4),
        _row("b1", "b", False, 0.9),
        _row("c1", "c", True, 0.1),
        _row("c2", "c", True, 0.5),
    ],
    1: [
        _row("a1", "a", False, 0.6),
        _row("a2", "a", False, 0.0),
        _row("b1", "b", False, 0.5),
        _row("c1", "c", True, 0.3),
        _row("c2", "c", True, 0.3),
    ],
}


def test_summary_matches_a_hand_computation():
    summary = {
        split: {m: v.to_dict() for m, v in by.items()}
        for split, by in aggregation.summarize_method(SEED_ROWS, ["chrf", "exact"], n_boot=300, seed=4).items()
    }
    # seed 0: ID macro = (0.3 + 0.9) / 2 = 0.6; seed 1: (0.3 + 0.5) / 2 = 0.4
    assert summary["id"]["chrf"]["mean"] == pytest.approx(0.5)
    assert summary["id"]["chrf"]["std"] == pytest.approx(np.sqrt(0.02))
    assert summary["ood"]["chrf"]["mean"] == pytest.approx(0.3)
    assert summary["ood"]["chrf"]["std"] == pytest.approx(0.0)
    assert summary["id"]["exact"] == {"mean": None, "std": None, "ci": None, "seeds": 0, "n": 0, "per_seed": {},
                                      "seed_ci": None}
    assert summary["id"]["chrf"]["per_seed"] == {"0": pytest.approx(0.6), "1": pytest.approx(0.4)}
    # the seed interval resamples the two seeds' scores: means of {.6, .6}, {.6, .4}, {.4, .4}
    lo, hi = summary["id"]["chrf"]["seed_ci"]
    assert (lo, hi) == (pytest.approx(0.4), pytest.approx(0.6))
    # Brute-force bootstrap: the 6 pooled ID rows resampled with the same generator draws.
    scores = np.array([0.2, 0.4, 0.9, 0.6, 0.0, 0.5])
    envs = np.array(list("aabaab"))
    rng = np.random.default_rng(4)
    boots = []
    for _ in range(300):
        idx = rng.integers(0, 6, 6)
        s, e = scores[idx], envs[idx]
        boots.append(np.mean([s[e == k].mean() for k in sorted(set(e))]))
    assert summary["id"]["chrf"]["ci"] == pytest.approx(list(np.quantile(boots, [0.025, 0.975])))
    per_env = {env: e.to_dict() for env, e in aggregation.per_env_means(SEED_ROWS, ["chrf"]).items()}
    assert per_env["a"]["chrf"] == pytest.approx(0.3) and per_env["b"]["chrf"] == pytest.approx(0.7)
    assert per_env["c"] == {"ood": True, "chrf": pytest.approx(0.3)}


def test_paired_test_matches_direct_call_on_matched_ids():
    other = {
        seed: [
            dict(r, scores={"chrf": r["scores"]["chrf"] + 0.1 * (i % 3)})
            for i, r in enumerate(rows)
        ]
        for seed, rows in SEED_ROWS.items()
    }
    other[1] = list(reversed(other[1]))  # order must not matter: pairing is by id
    tests = aggregation.paired_tests(
        {"erm": SEED_ROWS, "new": other}, "erm", ["chrf"], n_boot=500, seed=2
    )
    ids = ["a1", "a2", "b1"]
    base = {"a1": 0.4, "a2": 0.2, "b1": 0.7}
    new = {"a1": 0.4, "a2": 0.3, "b1": 0.9}  # seed 0 adds 0, .1, .2; seed 1 adds 0, .1, .2
    direct = paired_bootstrap_test(
        [new[i] for i in ids], [base[i] for i in ids], n_boot=500, seed=2
    )
    got = tests["new"]["id"]["chrf"].to_dict()
    assert got["delta"] == pytest.approx(direct["delta"]) and got["p_value"] == direct["p_value"]
    assert got["ci"] == pytest.approx(list(direct["ci"])) and got["n"] == 3
    assert "erm" not in tests


def test_table1_shows_absent_metrics_as_dash():
    results = aggregation.aggregate_study({"erm": SEED_ROWS}, ["chrf", "bertscore"])
    table = table1(results)
    assert table.header == ["method", "ID chrF", "ID BERTScore", "OOD chrF", "OOD BERTScore",
                            "worst env chrF", "worst env BERTScore"]
    row = table.rows[0]
    assert row[2] == "—" and row[4] == "—" and row[1].startswith("0.500 ± 0.141 [")
    assert row[6] == "—" and row[5] == "0.300 ± 0.000 [0.300, 0.300]"


def test_worst_env_is_the_lowest_environment_per_seed_then_averaged():
    # per-env means: seed 0 a .3, b .9, c .3 -> .3; seed 1 a .3, b .5, c .3 -> .3
    worst = aggregation.worst_env_summary(SEED_ROWS, ["chrf", "exact"])
    assert worst["chrf"].mean == pytest.approx(0.3) and worst["chrf"].std == pytest.approx(0.0)
    assert (worst["chrf"].seeds, worst["chrf"].n, worst["chrf"].ci) == (2, 10, None)
    assert worst["exact"].mean is None
    rows = {0: SEED_ROWS[0], 1: [dict(r, scores={"chrf": 1.0 if r["env"] != "b" else 0.1}) for r in SEED_ROWS[1]]}
    assert aggregation.worst_env_summary(rows, ["chrf"])["chrf"].mean == pytest.approx((0.3 + 0.1) / 2)


def test_comparisons_against_the_baseline_use_the_seeds_scores():
    # "new" adds 0.3 to every ID row of seed 0 and 0.1 of seed 1: ID 0.9 / 0.5 against 0.6 / 0.4
    shifted = {seed: [dict(r, scores={"chrf": r["scores"]["chrf"] + (0.0 if r["ood"] else (0.3, 0.1)[seed])})
                      for r in rows] for seed, rows in SEED_ROWS.items()}
    scores = aggregation.aggregate_study({"erm": SEED_ROWS, "new": shifted}, ["chrf"])
    got = {c.where: c for c in aggregation.study_comparisons(scores)}
    assert list(got) == ["ID chrf", "OOD chrf", "worst environment chrf"]
    # gain 0.2; sds: new |0.9 - 0.5| / sqrt(2) = 0.283, erm 0.141 -> within the spread
    assert got["ID chrf"].gain == pytest.approx(0.2) and got["ID chrf"].outcome == "within spread"
    assert (got["ID chrf"].wins, got["ID chrf"].n_seeds) == (2, 2)
    assert got["OOD chrf"].outcome == "tie"


def _results(zero_shot_rows=None):
    from robustvlm.analysis.summary import EvalMetrics

    rows = {"erm": SEED_ROWS, "new": {s: [dict(r, scores={**r["scores"], "exact": float(r["scores"]["chrf"] > 0.3)})
                                         for r in rows] for s, rows in SEED_ROWS.items()}}
    scores = aggregation.aggregate_study(rows, ["chrf", "exact"])
    metrics = EvalMetrics(5, {}, {"chrf": 0.5}, {"chrf": 0.3})
    runs = {label: aggregation.MethodRuns(label, {"seed": 0}, {"0": aggregation.RunRecord("runs/x", metrics)})
            for label in rows}
    zero_shot = aggregation.zero_shot_scores(zero_shot_rows, ["chrf", "exact"]) if zero_shot_rows else None
    return aggregation.StudyResults(scores, runs, [0, 1], {"cee": "not computed"}, zero_shot=zero_shot)


@pytest.fixture(scope="module")
def studies():
    """A study without and one with a zero-shot evaluation (seed 1's rows)."""
    return _results(), _results(SEED_ROWS[1])


def test_study_results_read_back_through_their_class(studies):
    import json

    for results in studies:
        written = json.dumps(results.to_dict())
        again = aggregation.StudyResults.from_dict(json.loads(written))
        assert json.dumps(again.to_dict()) == written
        assert again.scores.methods["new"].summary["id"]["chrf"] == results.scores.methods["new"].summary["id"]["chrf"]
        assert again.scores.significance == results.scores.significance
        assert again.runs == results.runs and again.zero_shot == results.zero_shot
    assert "zero_shot" not in studies[0].to_dict()  # a study without it writes what it wrote before


def test_zero_shot_scores_are_one_evaluation_macro_averaged_by_hand():
    zero = aggregation.zero_shot_scores(SEED_ROWS[1], ["chrf"])
    # seed 1's rows: a (.6 + .0) / 2 = .3, b .5 -> ID (.3 + .5) / 2; c (.3 + .3) / 2 -> OOD .3
    assert zero.summary["id"]["chrf"].mean == pytest.approx(0.4) and zero.summary["id"]["chrf"].std is None
    assert zero.summary["ood"]["chrf"].mean == pytest.approx(0.3)
    assert zero.per_env["a"].scores["chrf"] == pytest.approx(0.3) and zero.per_env["c"].ood
    assert zero.worst["chrf"].mean == pytest.approx(0.3)


def test_table1_and_the_per_environment_table_put_the_untouched_model_first(studies):
    from robustvlm.report.study_report import ZERO_SHOT_ROW, per_env_table

    results = studies[1]
    table = table1(results.scores, results.zero_shot)
    assert [row[0] for row in table.rows] == [ZERO_SHOT_ROW, "erm", "new"]
    assert table.rows[0][1] == "0.400" and table1(results.scores).rows[0][0] == "erm"
    envs = per_env_table(results, "chrf")
    assert envs.header == ["environment (chrF)", ZERO_SHOT_ROW, "erm", "new"]
    # erm's env a: seed 0 (.2 + .4) / 2 = .3, seed 1 .3 -> .3; env b (.9 + .5) / 2 = .7
    assert envs.rows == [["a", "0.300", "0.300", "0.300"], ["b", "0.500", "0.700", "0.700"],
                         ["c (OOD)", "0.300", "0.300", "0.300"]]
