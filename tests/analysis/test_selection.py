"""Model selection over a sweep (DomainBed's training-domain validation and oracle), checked
against a hand-built table and a brute-force enumeration; the nearest colour rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from robustvlm.analysis.selection import (
    ANTI_COLOUR,
    COLOUR,
    CONSTANT,
    NO_ANSWER,
    ORACLE,
    SHAPE,
    TRAINING_DOMAIN,
    CheckpointScores,
    colour_rule_prototypes,
    nearest_rule,
    select_sweep,
)
from robustvlm.errors import DataError

TRAIN, TEST = ["A", "B"], ["T", "U"]


def _ck(seed, draw, step, val, test):
    return CheckpointScores(
        "m", draw, seed, step, dict(zip(TRAIN + TEST, val)), dict(zip(TRAIN + TEST, test))
    )


# (seed, draw, step, held-out accuracy A B T U, reported accuracy A B T U)
HAND = [
    _ck(0, 0, 1, [0.6, 0.8, 0.25, 0.5], [0.9, 0.85, 0.2, 0.5]),
    _ck(0, 0, 2, [0.7, 0.8, 0.15, 0.55], [0.92, 0.86, 0.1, 0.52]),
    _ck(
        0, 1, 1, [0.8, 0.8, 0.62, 0.58], [0.7, 0.7, 0.6, 0.6]
    ),  # best training-domain score, seed 0
    _ck(0, 1, 2, [0.5, 0.6, 0.88, 0.45], [0.6, 0.6, 0.9, 0.5]),
    _ck(1, 0, 1, [0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]),
    _ck(
        1, 0, 2, [0.9, 0.9, 0.1, 0.5], [0.95, 0.9, 0.05, 0.5]
    ),  # ties draw 1 step 1: the lower draw wins
    _ck(1, 1, 1, [0.9, 0.9, 0.3, 0.4], [0.8, 0.8, 0.3, 0.4]),
    _ck(1, 1, 2, [0.6, 0.6, 0.7, 0.6], [0.6, 0.6, 0.7, 0.7]),
]


def test_selection_matches_the_hand_computed_table():
    sel = select_sweep(HAND, TRAIN, TEST)["m"]
    td, oracle = sel[TRAINING_DOMAIN], sel[ORACLE]
    assert (td.choices[0]["T"].draw, td.choices[0]["T"].step) == (1, 1)
    assert (td.choices[1]["T"].draw, td.choices[1]["T"].step) == (0, 2)
    assert td.per_env["T"].mean == pytest.approx(0.325)
    assert td.per_env["T"].se == pytest.approx(
        0.275 / np.sqrt(2)
    )  # DomainBed: std ddof 0 / sqrt(n)
    assert td.per_env["A"].mean == pytest.approx((0.7 + 0.95) / 2)
    assert td.test_mean.mean == pytest.approx((0.6 + 0.275) / 2)
    assert td.test_worst.mean == pytest.approx((0.6 + 0.05) / 2)
    assert td.worst_all.mean == pytest.approx((0.6 + 0.05) / 2)
    # the oracle: last checkpoint of each draw, chosen per test environment on its held-out part
    assert {e: (c.draw, c.step) for e, c in oracle.choices[0].items()} == {"T": (1, 2), "U": (0, 2)}
    assert {e: (c.draw, c.step) for e, c in oracle.choices[1].items()} == {"T": (1, 2), "U": (1, 2)}
    assert oracle.per_env["T"].mean == pytest.approx(0.8)
    assert oracle.per_env["U"].mean == pytest.approx(0.61)
    assert set(oracle.per_env) == set(TEST) and oracle.worst_all is None
    assert oracle.test_mean.mean == pytest.approx((0.71 + 0.7) / 2)
    assert oracle.test_worst.mean == pytest.approx((0.52 + 0.7) / 2)


def _brute_force(runs, seed):
    """Every candidate, sorted by hand: score desc, draw asc, step desc (training domain)."""
    mine = [r for r in runs if r.seed == seed]
    td = sorted(mine, key=lambda r: (-(r.val["A"] + r.val["B"]) / 2, r.draw, -r.step))[0]
    oracle = {}
    for env in TEST:
        last = [
            max((r for r in mine if r.draw == d), key=lambda r: r.step)
            for d in {r.draw for r in mine}
        ]
        oracle[env] = sorted(last, key=lambda r: (-r.val[env], r.draw))[0].test[env]
    return td.test, oracle


def test_selection_equals_a_brute_force_enumeration_on_random_tables():
    rng = np.random.default_rng(0)
    for _ in range(20):
        # accuracies on a grid of 0.1 so that ties happen
        runs = [
            _ck(s, d, t, rng.integers(0, 11, 4) / 10, rng.integers(0, 11, 4) / 10)
            for s, d, t in itertools.product(range(3), range(4), (10, 20, 30))
        ]
        sel = select_sweep(runs, TRAIN, TEST)["m"]
        for seed in range(3):
            td_test, oracle = _brute_force(runs, seed)
            assert {
                e: sel[TRAINING_DOMAIN].choices[seed][e].test[e] for e in TRAIN + TEST
            } == td_test
            assert {e: sel[ORACLE].choices[seed][e].test[e] for e in TEST} == oracle


def test_selection_refuses_empty_input():
    with pytest.raises(DataError):
        select_sweep([], TRAIN, TEST)
    with pytest.raises(DataError):
        select_sweep(HAND, TRAIN, [])


def test_nearest_rule_names_colour_anti_colour_content_and_chance():
    protos = colour_rule_prototypes({"tr9": 0.9, "tr8": 0.8, "rev": 0.1, "free": 0.5}, 0.25)
    assert protos[SHAPE] == {"tr9": 0.75, "tr8": 0.75, "rev": 0.75, "free": 0.75}
    assert protos[ANTI_COLOUR]["rev"] == pytest.approx(0.9)
    # the measurements of design.md: ERM, Dynamic BIRM with the paper's controller, IRMv1
    assert (
        nearest_rule({"tr9": 0.95, "tr8": 0.84, "rev": 0.08, "free": 0.51}, protos).rule == COLOUR
    )
    assert (
        nearest_rule({"tr9": 0.05, "tr8": 0.16, "rev": 0.92, "free": 0.49}, protos).rule
        == ANTI_COLOUR
    )
    assert (
        nearest_rule({"tr9": 0.5, "tr8": 0.49, "rev": 0.51, "free": 0.5}, protos).rule == CONSTANT
    )
    assert nearest_rule({"tr9": 0.8, "tr8": 0.74, "rev": 0.72, "free": 0.73}, protos).rule == SHAPE
    assert nearest_rule({"tr9": 0.0, "tr8": 0.05, "rev": 0.0, "free": 0.1}, protos).rule == NO_ANSWER
