"""Zoo II: the in-context curriculum (associative recall, picture episodes, its stages and curves)
and the members pretrained on augmented pictures; the earlier members keep their keys."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from robustvlm.data.collate import IGNORE_INDEX
from robustvlm.models.zoo_recipes import FULL, QUICK, RECIPES, ZOO2, ZOO3, recipe
from robustvlm.workflows.zoo.build import build_members, selected
from robustvlm.workflows.zoo.data import instruction_sample, training_pool
from robustvlm.workflows.zoo.members import stages
from robustvlm.workflows.zoo.recall import (
    ContextCurve,
    RecallPools,
    emergence_step,
    labelled_token_scores,
    recall_batch,
)

#: The keys of every member made before Zoo II (their folders, i.e. their bit-for-bit rebuilds).
KEYS_BEFORE = {
    "quick-clip": "ff1efd17a2d7", "quick-siglip": "99005af77c79", "quick-llava": "a899ad9aa9bc",
    "quick-idefics3": "0a7ce0590c68", "clip-xs": "e210b365852c", "clip-s": "d43359dcf753", "clip-m": "67ffae7d2c9c",
    "siglip-s": "ef00e3f9cb31", "siglip-m": "4b4ce7e235df", "llava-clip-m": "3500bb7ff255",
    "llava-clip-m-short": "57168d5d80a6", "llava-clip-s": "4115c80ad990", "idefics3-siglip-m": "0faaf78411b7",
    "idefics3-siglip-xs": "755b9b60cc20", "idefics3-scratch-s": "854726acf175", "idefics3-scratch-m": "f65b4bf5737d",
    "llava-scratch-s": "7bc99612899b", "llava-scratch-m": "8099775afe98", "llava-clip-m-icl": "a45ef17537e5",
}
POOLS = RecallPools(keys=np.arange(10, 60), values=np.arange(100, 150), bos=1)


def test_earlier_members_keep_their_keys_and_zoo_ii_adds_new_names():
    assert {r.name: r.key() for r in (*QUICK, *FULL)} == KEYS_BEFORE
    assert not {r.name for r in ZOO2} & set(KEYS_BEFORE)
    assert len({r.key() for r in RECIPES.values()}) == len(RECIPES)
    assert selected(False, None) == [*FULL, *ZOO2, *ZOO3]


def test_recall_labels_exactly_the_values_of_repeated_keys_with_their_sequence_assignment():
    rng = np.random.default_rng(0)
    ids, labels, levels = recall_batch(POOLS, rng, 64, max_keys=6, n_pairs=12)
    assert ids.shape == labels.shape == (64, 25) and (ids[:, 0] == 1).all()
    expected_levels, assignments = [], []
    for row, lab in zip(ids.tolist(), labels.tolist()):
        value_of: dict[int, int] = {}
        for t in range(1, len(row), 2):
            key, value = row[t], row[t + 1]
            assert 10 <= key < 60 and 100 <= value < 150 and lab[t] == IGNORE_INDEX
            if key in value_of:  # a repeat: labelled, with the value this sequence gave the key
                assert lab[t + 1] == value == value_of[key]
                expected_levels.append(math.log(len(value_of)))
            else:
                assert lab[t + 1] == IGNORE_INDEX
                value_of[key] = value
        assert 2 <= len(value_of) <= 6 and len(set(value_of.values())) == len(value_of)
        assignments.append(value_of)
    assert np.allclose(levels.numpy(), expected_levels)
    # per-sequence assignments: a key met in two sequences seldom keeps its value
    pairs = [(a[k], b[k]) for a in assignments for b in assignments if a is not b for k in a.keys() & b.keys()]
    assert pairs and np.mean([x == y for x, y in pairs]) < 0.2


def test_labelled_token_scores_match_a_loop_over_positions():
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 9)
    labels = torch.full((2, 6), IGNORE_INDEX)
    labels[0, 2], labels[0, 3], labels[1, 5] = 4, 7, 0
    nll, correct = labelled_token_scores(logits, labels)
    expected = [-torch.log_softmax(logits[b, t - 1], -1)[labels[b, t]] for b, t in ((0, 2), (0, 3), (1, 5))]
    assert torch.allclose(nll, torch.stack(expected))
    assert correct.tolist() == [bool(logits[b, t - 1].argmax() == labels[b, t]) for b, t in ((0, 2), (0, 3), (1, 5))]
    first, _ = labelled_token_scores(logits, labels, first_only=True)
    assert torch.allclose(first, torch.stack([expected[0], expected[2]]))  # (0, 3) follows a labelled token


def test_the_curve_averages_windows_and_copying_emerges_below_half_the_level():
    curve = ContextCurve(every=2)
    for loss in (3.0, 2.0, 1.0, 0.4, 0.2, 0.2):
        curve.add(torch.tensor([loss]), torch.tensor([loss < 1]), torch.tensor([1.2]))
    assert [row["loss"] for row in curve.curve] == [2.5, 0.7, 0.2]
    assert [row["accuracy"] for row in curve.curve] == [0.0, 0.5, 1.0]
    assert curve.report()["emergence_step"] == 6  # 0.7 is not below 0.6; 0.2 is
    assert emergence_step([{"step": 1, "loss": 2.0, "level": 1.0}]) is None


def test_the_curriculum_runs_recall_then_episodes_then_the_instruction_mix():
    assert stages(recipe("llava-clip-m-curriculum")) == [("recall", 4000), ("episodes", 1500), ("tune", 500)]
    assert stages(recipe("llava-clip-m")) == [("align", 200), ("tune", 2000)]


def test_an_augmented_pool_draws_the_same_samples_with_varied_pictures():
    plain, varied = training_pool(200, seed=0), training_pool(200, seed=0, augmented=True)
    a, b = (instruction_sample(p, np.random.default_rng(4), "x") for p in (plain, varied))
    assert a.messages == b.messages and a.target == b.target
    fresh = [training_pool(200, seed=0, augmented=True) for _ in range(2)]
    draws = [[np.asarray(p.picture(i)) for i in range(20)] for p in fresh]
    assert all(np.array_equal(x, y) for x, y in zip(*draws))  # the augmentation stream is seeded
    changed = [not np.array_equal(x, np.asarray(plain.picture(i))) for i, x in enumerate(draws[0])]
    assert np.mean(changed) > 0.5  # most pictures varied (all steps skipped: the identity, 1.5%)
    for r in ZOO2:
        if r.name.endswith("-aug"):
            base = recipe(r.name[: -len("-aug")])
            assert r.augment and not base.augment
            assert r.model_dump(exclude={"name", "augment", "tower"}) == base.model_dump(exclude={"name", "augment", "tower"})


@pytest.mark.slow
def test_a_quick_curriculum_member_builds_with_its_curves_and_context_check(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path))
    [built] = build_members([recipe("quick-llava-curriculum")])
    info = json.loads((built.folder / "zoo_member.json").read_text())
    assert [s["stage"] for s in info["stages"]] == ["recall", "episodes", "tune"]
    assert info["machine"]["torch"]["threads"] >= 1  # the machine that built it (zoo_member.json)
    recall, episodes = info["stages"][0], info["stages"][1]
    assert len(recall["curve"]) == 6 and len(episodes["curve"]) == 4  # windows of 1 step at these budgets
    assert all(row["level"] > 0 and 0 <= row["accuracy"] <= 1 for row in recall["curve"] + episodes["curve"])
    assert "emergence_step" in recall and "defined_label_accuracy" in info


def test_the_curriculum_member_is_built_first_among_the_vlms():
    # its recall and episode stages are most of its cost: ordered by the tune steps alone it
    # started last and ran alone on one core at the end of `zoo build --jobs 2`
    from robustvlm.workflows.zoo.build import build_order

    recipes = [*FULL, *ZOO2]
    ordered = [recipes[i] for i in build_order(recipes)]
    n_towers = sum(not r.is_vlm for r in recipes)
    assert not any(r.is_vlm for r in ordered[:n_towers])
    assert ordered[n_towers].name == "llava-clip-m-curriculum"
