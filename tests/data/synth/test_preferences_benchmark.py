"""The built-in `preferences` benchmark and its `preferences-cue70`, `preferences-salient` and
`preferences-mixed` variants: the cue rates the manifest states, measured from the data, and only the image
separating chosen from rejected (for `preferences-salient` and `preferences-mixed`, read from the
pixels)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from robustvlm.data.preferences import load_pairs
from robustvlm.data.synth import synthesize
from robustvlm.data.synth.preferences import (
    CLAUSES,
    COLOURS,
    COUNT_WORDS,
    FILLERS,
    KINDS,
    statement,
)


@pytest.fixture(scope="module", params=["preferences", "preferences-cue70", "preferences-salient", "preferences-mixed"])
def bench(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("prefs")
    synthesize(request.param, root, seed=0, n_per_env=150)
    rows = [json.loads(line) for line in (root / "data.jsonl").read_text().splitlines()]
    return root, rows, json.loads((root / "manifest.json").read_text())


def close(measured: float, stated: float, n: int) -> bool:
    """Within 4 binomial standard errors (and 1/n) of the stated rate."""
    return abs(measured - stated) <= 4 * math.sqrt(stated * (1 - stated) / n) + 1 / n


def words(text: str) -> int:
    return len(text.split())


def test_cue_rates_in_the_manifest_hold_in_the_data(bench):
    _, rows, manifest = bench
    assert set(manifest["cue_rates"]) == {"clause", "long", "short", "plain"}
    for env, rates in manifest["cue_rates"].items():
        pairs = [r for r in rows if r["env"] == env]
        n = len(pairs)
        measured = {
            "chosen_longer": sum(words(r["chosen"]) > words(r["rejected"]) for r in pairs) / n,
            "chosen_shorter": sum(words(r["chosen"]) < words(r["rejected"]) for r in pairs) / n,
            "equal_length": sum(words(r["chosen"]) == words(r["rejected"]) for r in pairs) / n,
            "clause_on_rejected": sum(any(c in r["rejected"] for c in CLAUSES) for r in pairs) / n,
            "clause_on_chosen": sum(any(c in r["chosen"] for c in CLAUSES) for r in pairs) / n,
        }
        for key, stated in rates.items():
            assert close(measured[key], stated, n), (env, key, measured[key], stated)
    plain = [r for r in rows if r["env"] == "plain"]
    assert not any(any(c in r["chosen"] + r["rejected"] for c in CLAUSES) for r in plain)
    assert 0.3 < sum(any(f in r["chosen"] for f in FILLERS) for r in plain) / len(plain) < 0.7


def test_only_the_image_separates_chosen_from_rejected(bench):
    _, rows, manifest = bench
    altered = {"colour": 0, "count": 0, "shape": 0}
    for r in rows:
        truth = r["truth"]
        core = statement(truth["kind"], truth["colour"], truth["count"])
        assert r["chosen"].startswith(core[:-1])  # the chosen response states what is drawn
        assert not any(c in r["chosen"] for c in CLAUSES)  # and never carries a false clause
        assert not r["rejected"].startswith(core[:-1])  # the rejected one changes an attribute
        altered[r["altered"]] += 1
    n = len(rows)
    for key, stated in manifest["alterations"].items():
        assert close(altered[key] / n, stated, n)
    # every attribute value appears in both chosen and rejected responses: no word gives it away
    assert set(manifest["colours"]) <= set(COLOURS) and set(manifest["counts"]) <= {1, 2, 3}
    for value in (*manifest["colours"], *KINDS, *(COUNT_WORDS[c - 1] for c in manifest["counts"])):
        assert any(value in r["chosen"] for r in rows) and any(value in r["rejected"] for r in rows)


def test_loads_as_preference_pairs_and_is_deterministic(bench, tmp_path):
    root, rows, manifest = bench
    pairs = load_pairs(root, verbose=False)
    assert pairs.layouts == {str(root / "data.jsonl"): "preference"} and len(pairs.pairs) == len(rows)
    assert manifest["envs"]["long"] == {"train": 150, "val": 0, "test": 50, "ood": False}
    synthesize(manifest["benchmark"], tmp_path, seed=0, n_per_env=150)
    assert (tmp_path / "data.jsonl").read_bytes() == (root / "data.jsonl").read_bytes()
    assert (tmp_path / "images" / "000007.png").read_bytes() == (root / "images" / "000007.png").read_bytes()


def test_the_cue70_variant_moves_only_the_cues(tmp_path):
    synthesize("preferences", tmp_path / "a", seed=0, n_per_env=60)
    synthesize("preferences-cue70", tmp_path / "b", seed=0, n_per_env=60)
    a, b = ([json.loads(line) for line in (tmp_path / d / "data.jsonl").read_text().splitlines()] for d in "ab")
    assert [(r["truth"], r["altered"], r["query"]) for r in a] == [(r["truth"], r["altered"], r["query"]) for r in b]
    assert (tmp_path / "a" / "images" / "000007.png").read_bytes() == (tmp_path / "b" / "images" / "000007.png").read_bytes()
    rates = json.loads((tmp_path / "b" / "manifest.json").read_text())["cue_rates"]
    assert rates["long"]["chosen_longer"] == 0.7 and rates["short"]["chosen_shorter"] == 0.7
    assert sum(x["cue"] != y["cue"] for x, y in zip(a, b)) > 0


def test_the_salient_variant_shows_the_deciding_colour_large(tmp_path):
    synthesize("preferences-salient", tmp_path, seed=0, n_per_env=60)
    rows = [json.loads(line) for line in (tmp_path / "data.jsonl").read_text().splitlines()]
    rates = json.loads((tmp_path / "manifest.json").read_text())["cue_rates"]
    assert rates["long"]["chosen_longer"] == 0.8 and rates["short"]["chosen_shorter"] == 0.8
    for r in rows:
        pixels = np.asarray(Image.open(tmp_path / r["image"]).convert("RGB"), dtype=float)
        shape = pixels.max(axis=2) - pixels.min(axis=2) > 80  # saturated pixels; the background is grey
        assert shape.mean() > 0.12, r["id"]  # more than a circle of the standard radius 12 covers (0.11)
        red, _, blue = pixels[shape].mean(axis=0)
        seen = "red" if red > blue else "blue"
        assert r["altered"] == "colour" and r["truth"]["colour"] == seen
        assert f" {seen} " in r["chosen"] and f" {seen} " not in r["rejected"]
        assert f" {'blue' if seen == 'red' else 'red'} " in r["rejected"]


def test_the_mixed_variant_shows_the_deciding_colour_as_the_larger_share(tmp_path):
    synthesize("preferences-mixed", tmp_path, seed=0, n_per_env=60)
    rows = [json.loads(line) for line in (tmp_path / "data.jsonl").read_text().splitlines()]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    rates = manifest["cue_rates"]
    assert rates["long"]["chosen_longer"] == 0.9 and rates["short"]["chosen_shorter"] == 0.9
    lo, hi = manifest["colour_share"]
    shares = []
    for r in rows:
        pixels = np.asarray(Image.open(tmp_path / r["image"]).convert("RGB"), dtype=float)
        shape = pixels.max(axis=2) - pixels.min(axis=2) > 80  # saturated pixels; the background is grey
        assert shape.mean() > 0.12, r["id"]
        is_red = pixels[shape][:, 0] > pixels[shape][:, 2]
        assert 0.1 < is_red.mean() < 0.9, r["id"]  # both colours in every shape
        seen = "red" if is_red.mean() > 0.5 else "blue"  # the colour of most of the shape's pixels
        shares.append(max(is_red.mean(), 1 - is_red.mean()))
        assert r["altered"] == "colour" and r["truth"]["colour"] == seen
        assert f" {seen} " in r["chosen"] and f" {seen} " not in r["rejected"]
        assert f" {'blue' if seen == 'red' else 'red'} " in r["rejected"]
    # the evidence varies per pair over the stated range: some pairs close, some clear
    shares = np.array(shares)
    assert lo - 0.02 <= shares.min() < lo + 0.05 and hi - 0.05 < shares.max() <= hi + 0.03
    assert 0.25 < (shares < (lo + hi) / 2).mean() < 0.75
    # within each cue environment the cue agrees on 90% of the training pairs, whatever the image
    for env, key in (("long", "chosen_longer"), ("short", "chosen_shorter")):
        train = [r for r in rows if r["env"] == env and r["split"] == "train"]
        agree = sum((words(r["chosen"]) > words(r["rejected"])) == (key == "chosen_longer")
                    and words(r["chosen"]) != words(r["rejected"]) for r in train) / len(train)
        assert close(agree, 0.9, len(train)), (env, agree)
