"""The `fashion-tasks` benchmark: task-type environments on Fashion-MNIST test-split scans, asked
in the zoo's own instruction-tuning wording, with answers checked against each record's class."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from robustvlm.data.real_images import FASHION_CLASSES, load_fashion_mnist
from robustvlm.data.synth import fashion_tasks as ft
from robustvlm.data.synth import synthesize
from robustvlm.data.synth.domains import FASHION_STYLES, scan_ink
from robustvlm.workflows.zoo import data as zoo


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("fashion_tasks")
    synthesize("fashion-tasks", out, seed=3, n_per_env=10)
    rows = [json.loads(line) for line in (out / "data.jsonl").read_text(encoding="utf-8").splitlines()]
    return out, rows


def test_environments_splits_and_held_out_task_types(bench):
    out, rows = bench
    counts = Counter((r["env"], r["split"], r["ood"]) for r in rows)
    for env in ("class/open", "group/word", "yesno/class"):
        assert counts[(env, "train", False)] == 10 and counts[(env, "test", False)] == 5
    assert counts[("class/lettered", "test", True)] == 5 and counts[("yesno/group", "test", True)] == 5
    assert json.loads((out / "manifest.json").read_text())["held_out"] == ["class/lettered", "yesno/group"]
    assert len({r["source_index"] for r in rows}) == len(rows)  # no scan asked twice


def test_answers_follow_each_records_class(bench):
    _, rows = bench
    _, labels = load_fashion_mnist("test")
    for r in rows:
        name = FASHION_CLASSES[int(labels[r["source_index"]])]
        assert r["class"] == name and r["group"] == zoo.GROUP_OF[name]
        if r["env"] == "class/open":
            assert r["target"] == name
        elif r["env"] == "group/word":
            assert r["target"] == zoo.GROUP_OF[name]
        elif r["env"] == "class/lettered":
            assert r["target"] == f"{'ABCDEFGHIJ'[FASHION_CLASSES.index(name)]}. {name}"
        else:  # "Is this a X? ..." -> yes exactly when X is the class (or its group)
            asked = r["instruction"].removeprefix("Is this a ").split("?")[0]
            truth = name if r["env"] == "yesno/class" else zoo.GROUP_OF[name]
            assert r["target"] == ("yes" if asked == truth else "no")
    assert {r["target"] for r in rows if r["env"].startswith("yesno")} == {"yes", "no"}


def test_questions_are_worded_as_the_zoo_was_tuned(bench):
    _, rows = bench
    rng = np.random.default_rng(0)
    assert ft.GROUPS == zoo.GROUPS and ft.QUESTION in zoo.QUESTIONS
    assert next(r for r in rows if r["env"] == "class/lettered")["instruction"] == zoo.ten_way_question()
    assert next(r for r in rows if r["env"] == "group/word")["instruction"] == zoo._group(0, rng)[0]
    open_question = zoo._open(0, rng)[0]
    assert next(r for r in rows if r["env"] == "class/open")["instruction"].endswith(
        open_question[open_question.index(" Answer with one of:"):])
    assert all(r["instruction"].endswith("? Answer yes or no.") for r in rows if r["env"].startswith("yesno"))


def test_pictures_are_test_split_scans_drawn_as_the_clean_domain(bench):
    out, rows = bench
    images, _ = load_fashion_mnist("test")
    for r in rows[::7]:
        expected = FASHION_STYLES["clean"](scan_ink(images[r["source_index"]]), np.random.default_rng(0))
        assert np.array_equal(np.asarray(Image.open(out / r["image"]).convert("RGB")), np.asarray(expected))
