"""analysis.verdict: the rule that calls a method better than the baseline, checked on cases
computed by hand, and the sentences built from it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robustvlm.analysis.verdict import (
    compare,
    compare_all,
    seed_spread,
    verdict_sentences,
    winners_sentence,
)
from robustvlm.errors import DataError


def test_a_clear_win_in_every_seed():
    # means 0.7 and 0.5 (gain 0.2); sds 0.1 and 0.1 (ddof 1): 0.2 > 0.1 -> better
    c = compare("IRMv1", "ERM", "reversed", {0: 0.6, 1: 0.7, 2: 0.8}, {0: 0.4, 1: 0.5, 2: 0.6})
    assert c.outcome == "better" and c.gain == pytest.approx(0.2) and c.spread == pytest.approx(0.1)
    assert (c.wins, c.losses, c.n_seeds) == (3, 0, 3)


def test_a_method_that_wins_in_some_seeds_only_is_within_the_spread():
    # per seed 0.9, 0.5, 0.4 against 0.5, 0.5, 0.5: mean 0.6 against 0.5 (gain 0.1), sd sqrt(0.14 / 2) = 0.2646 -> within
    c = compare("V-REx", "ERM", "colour-free", {0: 0.9, 1: 0.5, 2: 0.4}, {0: 0.5, 1: 0.5, 2: 0.5})
    assert c.outcome == "within spread"
    assert c.gain == pytest.approx(0.1) and c.spread == pytest.approx(math.sqrt(0.07))
    assert (c.wins, c.losses) == (1, 1)


def test_lower_is_better_and_the_margin():
    c = compare("IRMv1", "ERM", "Example1", {0: 10.0, 1: 11.0}, {0: 13.0, 1: 14.0}, higher_is_better=False)
    assert c.outcome == "better" and c.gain == pytest.approx(3.0) and c.wins == 2
    worse = compare("GroupDRO", "ERM", "Example1", {0: 16.0, 1: 17.0}, {0: 13.0, 1: 14.0}, higher_is_better=False)
    assert worse.outcome == "worse" and worse.losses == 2
    # ddof 0 sds are 0.001: a gain of 0.005 is above them but not above a margin of 0.01
    small = compare("A", "B", "e", {0: 0.506, 1: 0.504}, {0: 0.5, 1: 0.5}, margin=0.01, ddof=0)
    assert small.outcome == "within spread"


def test_ties_and_a_single_seed():
    assert compare("A", "B", "e", {0: 0.5, 1: 0.6}, {0: 0.6, 1: 0.5}).outcome == "tie"
    one = compare("A", "B", "e", {0: 0.9}, {0: 0.1})
    assert one.outcome == "one seed" and one.spread is None and (one.wins, one.n_seeds) == (1, 1)
    assert compare("A", "B", "e", {0: 0.5}, {0: 0.5}).outcome == "tie"


def test_seeds_are_paired_by_label():
    c = compare("A", "B", "e", {1: 0.9, 2: 0.2}, {2: 0.3, 1: 0.1, 3: 0.5})
    assert (c.wins, c.losses, c.n_seeds) == (1, 1, 2)


def test_seed_spread_resamples_seeds():
    s = seed_spread([0.287, 0.138, 0.046])
    assert s.mean == pytest.approx(0.157) and s.sd == pytest.approx(np.std([0.287, 0.138, 0.046], ddof=1))
    lo, hi = s.ci
    # a mean of 3 resampled seeds lies between the smallest and the largest seed
    assert 0.046 <= lo < s.mean < hi <= 0.287
    assert seed_spread([0.4]).ci is None and seed_spread([0.4]).sd is None
    with pytest.raises(DataError):
        seed_spread([])


def test_sentences_name_the_winner_the_setting_and_the_seeds():
    comparisons = [
        compare("IRMv1", "ERM", "reversed", {0: 0.6, 1: 0.7, 2: 0.8}, {0: 0.4, 1: 0.5, 2: 0.6}),
        compare("IRMv1", "ERM", "colour-free", {0: 0.9, 1: 0.5, 2: 0.4}, {0: 0.5, 1: 0.5, 2: 0.5}),
    ]
    lines = verdict_sentences(comparisons, metric="accuracy (higher is better)", selection="the final step",
                              fmt=lambda v: f"{100 * v:.1f}", what="environment")
    # the conclusion first, in one line, then the detail (issue 46.7)
    assert lines[0] == "IRMv1 beat ERM by more than the seed spread on at least one environment (the detail follows)."
    assert lines[1].startswith("Compared with ERM on accuracy (higher is better), models chosen by the final step")
    assert lines[2] == ("IRMv1 beat ERM on reversed (70.0 against 50.0, 20.0 better, seed sd up to 10.0; "
                        "better in 3 of 3 seeds); is within the seed spread of ERM on colour-free.")
    assert len(lines) == 3


def test_sentences_say_plainly_when_nothing_beat_the_baseline():
    within = [compare("BIRM", "ERM", "OOD", {0: 0.3, 1: 0.1}, {0: 0.2, 1: 0.25})]
    assert verdict_sentences(within, metric="m", selection="s")[0] == (
        "No method beat ERM by more than the seed spread on any setting.")
    single = [compare("BIRM", "ERM", "OOD", {0: 0.3}, {0: 0.2})]
    lines = verdict_sentences(single, metric="m", selection="s", fmt=lambda v: f"{v:.1f}")
    assert lines[0] == "One seed only: nothing can be concluded about any method against ERM."
    assert lines[-1] == "BIRM has one seed on OOD (0.3 against 0.2), so no spread and no call."
    assert verdict_sentences([], metric="m", selection="s") == [
        "No method was compared with a baseline: nothing to conclude."]


def test_compare_all_skips_the_baseline_the_references_and_diverged_seeds():
    scores = {"ERM": {"Example1": {0: 13.0, 1: 14.0}, "Example2": {0: 0.4, 1: 0.5}},
              "IRMv1": {"Example1": {0: 10.0, 1: math.nan}, "Example2": {0: math.nan, 1: math.nan}},
              "Oracle": {"Example1": {0: 1.0, 1: 1.0}}}
    got = compare_all(scores, "ERM", skip=["Oracle"], higher_is_better=False)
    assert [(c.method, c.where, c.outcome, c.n_seeds) for c in got] == [("IRMv1", "Example1", "one seed", 1)]
    assert got[0].gain == pytest.approx(3.5)


def test_winners_sentence():
    win = compare("IRMv1", "ERM", "reversed", {0: 0.6, 1: 0.7, 2: 0.8}, {0: 0.4, 1: 0.5, 2: 0.6})
    within = compare("BIRM", "ERM", "reversed", {0: 0.3, 1: 0.1}, {0: 0.2, 1: 0.25})
    assert winners_sentence([win, within], selection="oracle selection", fmt=lambda v: f"{100 * v:.1f}") == (
        "Under oracle selection, IRMv1 beat ERM on reversed (+20.0, better in 3 of 3 seeds).")
    assert winners_sentence([within], selection="validation") == (
        "Under validation, no method beat ERM by more than the seed spread.")
