"""The ladder's readings and summaries (`experiments.ladder.readings`) against hand-made runs."""

from __future__ import annotations

import json

import pytest

from robustvlm.analysis.selection import colour_rule_prototypes
from robustvlm.experiments.ladder.readings import (
    beats_erm,
    ladder_comparisons,
    readings,
    summarize,
    summary_from_dict,
    summary_to_dict,
)

TRAIN, TEST = ("a", "b"), ("test-reversed", "test-nocolour")
PROTOTYPES = colour_rule_prototypes({"a": 0.9, "b": 0.8, "test-reversed": 0.1, "test-nocolour": 0.5}, 0.25)


def _eval(step, acc, val):
    return {"step": step, "acc": dict(zip((*TRAIN, *TEST), acc)), "val": dict(zip(TRAIN, val))}


def _run(method, seed, evals, diverged=False):
    return {"source": "s", "rung": "r", "method": method, "seed": seed, "diverged": diverged, "evaluations": evals}


def test_readings_pick_the_final_the_validated_and_the_oracle_step():
    run = _run("irm", 0, [_eval(10, (0.9, 0.8, 0.1, 0.5), (0.7, 0.7)),
                          _eval(20, (0.7, 0.7, 0.7, 0.72), (0.9, 0.8)),
                          _eval(30, (0.8, 0.75, 0.4, 0.6), (0.6, 0.6))])
    got = readings(run, TRAIN, TEST)
    assert got["final"]["test-reversed"] == 0.4
    assert got["training-domain"]["test-nocolour"] == 0.72  # step 20 has the best held-out mean
    assert got["oracle"] == {"test-reversed": 0.7, "test-nocolour": 0.72}


def test_summary_statistics_rules_and_the_erm_comparison():
    colour = (0.9, 0.8, 0.1, 0.5)
    content = (0.75, 0.75, 0.75, 0.75)
    runs = [
        _run("erm", 0, [_eval(10, colour, (0.9, 0.8))]),
        _run("erm", 1, [_eval(10, (0.88, 0.8, 0.12, 0.52), (0.9, 0.8))]),
        _run("irm", 0, [_eval(10, content, (0.75, 0.75))]),
        _run("irm", 1, [_eval(10, (0.7, 0.7, 0.66, 0.70), (0.7, 0.7))]),
        _run("vrex", 0, [], diverged=True),
    ]
    summary = summarize(runs, TRAIN, TEST, PROTOTYPES)["s/r"]
    assert summary["erm"].rule == "colour" and summary["irm"].rule == "content (invariant)"
    free = summary["irm"].final["test-nocolour"]
    assert free.mean == pytest.approx(0.725) and free.std == pytest.approx(0.025) and free.n == 2
    assert summary["erm"].worst.mean == pytest.approx(0.11)
    assert summary["vrex"].n_diverged == 1 and summary["vrex"].final == {} and summary["vrex"].rule is None
    full = summarize(runs, TRAIN, TEST, PROTOTYPES)
    assert beats_erm(full, "s/r", "irm", "final")  # 72.5 vs 51: far beyond the spread
    assert not beats_erm(full, "s/r", "vrex", "final")  # nothing measured
    one_seed = summarize([r for r in runs if r["seed"] == 0], TRAIN, TEST, PROTOTYPES)
    assert not beats_erm(one_seed, "s/r", "irm", "final")  # 75 vs 50 in one seed: no spread, no call
    assert free.values == {"0": pytest.approx(0.75), "1": pytest.approx(0.70)}
    # the verdict's comparisons use beats_erm's rule on the per-seed values: IRMv1 72.5 vs ERM 51
    got = {c.where: c for c in ladder_comparisons(full, "final")}
    assert set(got) == {"s/r colour-free", "s/r reversed"}
    assert got["s/r colour-free"].outcome == "better" and got["s/r colour-free"].wins == 2
    assert got["s/r colour-free"].gain == pytest.approx(0.725 - 0.51)
    assert not beats_erm(full, "s/r", "erm", "final")


def test_a_summary_round_trips_through_its_dict_form():
    runs = [_run("erm", 0, [_eval(10, (0.9, 0.8, 0.1, 0.5), (0.9, 0.8))]), _run("vrex", 0, [], diverged=True)]
    summary = summarize(runs, TRAIN, TEST, PROTOTYPES)
    saved = json.loads(json.dumps(summary_to_dict(summary)))
    assert summary_from_dict(saved) == summary
    assert "rule" not in saved["s/r"]["vrex"] and saved["s/r"]["erm"]["final"]["test-nocolour"] == {
        "mean": 0.5, "std": 0.0, "n": 1, "values": {"0": 0.5}}
