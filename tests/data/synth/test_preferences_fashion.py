"""`preferences-fashion`: `preferences`' cue structure on Fashion-MNIST test-split scans drawn as
the model zoo's clean domain."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from robustvlm.data.preferences import load_pairs
from robustvlm.data.real_images import load_fashion_mnist
from robustvlm.data.synth import synthesize
from robustvlm.data.synth.domains import FASHION_STYLES, scan_ink
from robustvlm.data.synth.preferences import CLAUSES, FILLERS
from robustvlm.data.synth.preferences_fashion import QUERY
from robustvlm.multiple_choice.prompts import GENERATIVE_PROMPTS


def test_the_query_is_the_zoo_held_out_question():
    assert QUERY == GENERATIVE_PROMPTS[0]


def test_pairs_name_test_split_scans_with_the_preferences_cues(tmp_path):
    synthesize("preferences-fashion", tmp_path, n_per_env=20)
    records = [json.loads(line) for line in (tmp_path / "data.jsonl").read_text().splitlines()]
    assert len(records) == 4 * (20 + 20)
    assert len(load_pairs(tmp_path, verbose=False).pairs) == len(records)
    test_images, test_labels = load_fashion_mnist("test")
    names = ("t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag")
    assert len({r["truth"]["scan"] for r in records}) == len(records)  # each scan drawn once
    for r in records:
        scan = r["truth"]["scan"]
        clean = FASHION_STYLES["clean"](scan_ink(test_images[scan]), np.random.default_rng(0))
        assert np.array_equal(np.asarray(Image.open(tmp_path / r["image"]).convert("RGB")), np.asarray(clean))
        assert names[test_labels[scan]] == r["truth"]["class"] and f"a {r['truth']['class']}" in r["chosen"]
        assert r["truth"]["class"] not in r["rejected"].split(",")[0].split()
        bare = [t.split(",")[0].rstrip(".") for t in (r["chosen"], r["rejected"])]
        assert len(bare[0].split()) == len(bare[1].split()) == 7  # "This is a photo of a coat"
        phrases = CLAUSES if r["env"] == "clause" else FILLERS
        on = {"on_chosen": (True, False), "on_rejected": (False, True), "on_both": (True, True),
              "none": (False, False)}[r["cue"]]
        assert tuple(any(p in t for p in phrases) for t in (r["chosen"], r["rejected"])) == on
    train = [r for r in records if r["split"] == "train"]
    long_chosen = np.mean([r["cue"] == "on_chosen" for r in train if r["env"] == "long"])
    assert 0.75 <= long_chosen <= 1.0  # 90% in expectation
    assert {r["cue"] for r in records if r["env"] == "plain"} <= {"on_both", "none"}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["benchmark"] == "preferences-fashion" and manifest["cue_rates"]["long"]["chosen_longer"] == 0.9
