"""Generalization-matrix aggregation on hand-made scored runs, checked cell by cell."""

from __future__ import annotations

import numpy as np
import pytest

from robustvlm.analysis.reward import shortcut_failure_degradation
from robustvlm.analysis.reward_matrix import (
    MatrixResults,
    MatrixRun,
    aggregate_matrix,
    compare_labels,
    gap_points,
)

ENVS = ("a", "b")
IDS = {env: [f"{env}{i}" for i in range(6)] for env in ENVS}
TEXTS = {pid: (env, "x " * (1 + i % 3), "x " * 2) for env in ENVS for i, pid in enumerate(IDS[env])}


def run(label, seed, train, gaps, view="multimodal", text_gaps=None):
    """A run whose pair i of each env has reward difference gaps[env][i]."""
    rows = []
    for env in ENVS:
        for pid, gap in zip(IDS[env], gaps[env]):
            row = {"id": pid, "env": env, view: [gap, 0.0]}
            if text_gaps is not None:
                row["drop"] = [text_gaps[env][IDS[env].index(pid)], 0.0]
            rows.append(row)
    return MatrixRun(label, seed, train, rows, view, "drop" if text_gaps is not None else None)


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(0)
    out = []
    for seed in (0, 1):
        for train in ENVS:
            for label, view in (("std", "multimodal"), ("txt", "drop"), ("sa", "multimodal")):
                gaps = {env: rng.normal(size=6) for env in ENVS}
                text = {env: rng.normal(size=6) for env in ENVS} if label != "txt" else None
                out.append(run(label, seed, train, gaps, view, text))
    return out


def accuracy(r: MatrixRun, env: str, view=None) -> float:
    return float(np.mean([row[view or r.view][0] > 0 for row in r.rows if row["env"] == env]))


def test_cells_averages_and_sfd_match_a_direct_computation(runs):
    res = aggregate_matrix(runs, TEXTS, proxy_label="txt")
    assert res.labels == ["std", "txt", "sa"] and res.train_envs == ["a", "b"] and res.seeds == [0, 1]
    by = {(r.label, r.seed, r.train_env): r for r in runs}
    for label in ("std", "txt", "sa"):
        for train in ENVS:
            for test in ENVS:
                values = [accuracy(by[(label, s, train)], test) for s in (0, 1)]
                cell = res.cells[label][f"{train}->{test}"]
                assert cell["values"] == pytest.approx(values)
        iid = [np.mean([accuracy(by[(label, s, e)], e) for e in ENVS]) for s in (0, 1)]
        ood = [np.mean([accuracy(by[(label, s, "a")], "b"), accuracy(by[(label, s, "b")], "a")]) for s in (0, 1)]
        assert res.averages[label]["iid"]["values"] == pytest.approx(iid)
        assert res.averages[label]["ood"]["values"] == pytest.approx(ood)
    for s in (0, 1):
        main, proxy = by[("sa", s, "a")], by[("txt", s, "a")]
        pids = IDS["b"]
        expected = shortcut_failure_degradation(
            [main.correct()[i] for i in pids], [proxy.correct()[i] for i in pids]).sfd
        assert res.sfd["sa"]["a->b"]["values"][s] == pytest.approx(expected)
    assert "txt" not in res.sfd  # the text-only models are the reference, not compared
    assert MatrixResults.from_dict(res.to_dict()) == res


def test_text_only_test_lengths_and_comparison(runs):
    res = aggregate_matrix(runs, TEXTS, proxy_label="txt")
    by = {(r.label, r.seed, r.train_env): r for r in runs}
    entry = res.text_only_test["std"]["a"]
    assert entry["drop"]["values"] == pytest.approx([accuracy(by[("std", s, "a")], "a", "drop") for s in (0, 1)])
    assert res.lengths["a"] == {"chosen_longer": pytest.approx(2 / 6), "chosen_shorter": pytest.approx(2 / 6),
                                "equal": pytest.approx(2 / 6), "balanced_pairs": 6}
    diff = compare_labels(res, "std", "sa")
    assert diff["ood"]["values"] == pytest.approx(
        [b - a for a, b in zip(res.averages["std"]["ood"]["values"], res.averages["sa"]["ood"]["values"])])
    points = gap_points(runs, {pid: env for pid, (env, _, _) in TEXTS.items()}, label="sa", proxy_label="txt", seed=0)
    assert len(points) == 12 and {env for _, _, env in points} == {"a", "b"}  # 6 o.o.d. pairs per training env


def test_the_number_of_cells_behind_the_mean_sfd_is_counted():
    """A cell where the text-only model gets every pair right has no SFD: the mean leaves it out
    and `sfd_cells` says so (2 o.o.d. cells per seed, 1 defined)."""
    ones = {env: np.ones(6) for env in ENVS}
    mixed = {env: np.array([1.0, -1.0] * 3) for env in ENVS}
    runs = [run("txt", 0, "a", mixed, "drop"), run("txt", 0, "b", ones, "drop"),
            run("sa", 0, "a", mixed, text_gaps=mixed), run("sa", 0, "b", mixed, text_gaps=mixed)]
    res = aggregate_matrix(runs, TEXTS, proxy_label="txt")
    assert res.sfd_cells["sa"] == {"defined": [1], "cells": [2]}
    assert list(res.sfd["sa"]) == ["a->b"]
    assert res.sfd_average["sa"]["values"] == pytest.approx([res.sfd["sa"]["a->b"]["mean"]])
