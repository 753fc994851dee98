"""Failure diagnosis: verdict table, linear probe, option log-likelihoods, vision features, smoke."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from robustvlm.analysis.diagnosis import VERDICTS, diagnose_table, linear_probe_accuracy, skill
from robustvlm.data.images import load_image
from robustvlm.data.wordnet import open_wordnet, wordnet_available
from robustvlm.errors import DataError
from robustvlm.evaluation import diagnose
from robustvlm.models import find_parts
from robustvlm.models.loglik import option_logliks
from robustvlm.workflows.diagnose import run_diagnosis

torch.set_num_threads(1)


def _row(domain, probe, semantic, zero, icl=None, c=4):
    return {"domain": domain, "n_classes": c, "probe_acc": probe, "semantic_acc": semantic,
            "zero_shot_acc": zero, "icl_acc": icl}


def test_diagnose_table_covers_each_verdict():
    rows = [
        _row("blurred", 0.30, 0.95, 0.25, 0.30),    # probe near chance (0.25)
        _row("jargon", 0.95, 0.30, 0.30, 0.35),     # features fine, names not understood
        _row("medical", 0.95, 0.95, 0.30, 0.40),    # both fine, the model cannot map
        _row("natural", 0.95, 0.95, 0.90, 0.95),    # works
        _row("icl-fixes", 0.95, 0.95, 0.30, 0.90),  # zero-shot fails, demos fix the mapping
        _row("no-icl", 0.95, 0.95, 0.90),           # icl not measured
    ]
    out = diagnose_table(rows)
    assert [r["verdict"] for r in out] == ["visual", "semantic", "mapping", "none", "none", "none"]
    assert out[0]["gaps"] == ["visual", "mapping"] and out[2]["gaps"] == ["mapping"]
    assert out[2]["icl_gain"] == pytest.approx(0.10) and out[5]["icl_gain"] is None
    assert out[0]["probe_skill"] == pytest.approx((0.30 - 0.25) / 0.75)
    assert out[4]["mapping_skill"] == pytest.approx((0.90 - 0.25) / 0.75)  # the better of the two
    assert all(r["verdict"] in VERDICTS for r in out)
    assert rows[0].get("verdict") is None  # input rows untouched
    # thresholds are keyword arguments that move the verdict
    assert diagnose_table([rows[2]], mapping_min_skill=0.1)[0]["verdict"] == "none"
    assert diagnose_table([rows[3]], visual_min_skill=0.99)[0]["verdict"] == "visual"
    assert diagnose_table([rows[1]], semantic_min_skill=0.0)[0]["verdict"] == "mapping"


def test_diagnose_table_rejects_incomplete_rows():
    with pytest.raises(DataError, match="lacks probe_acc"):
        diagnose_table([{"domain": "a", "n_classes": 3, "semantic_acc": 1, "zero_shot_acc": 1}])
    with pytest.raises(DataError, match="2 classes"):
        skill(0.5, 1)
    assert skill(0.1, 10) == pytest.approx(0.0) and skill(1.0, 10) == pytest.approx(1.0)


def test_linear_probe_separable_vs_random_labels():
    rng = np.random.default_rng(0)
    labels = np.repeat(["a", "b", "c", "d"], 60)
    centres = rng.normal(size=(4, 16)) * 6
    separable = centres[np.searchsorted(["a", "b", "c", "d"], labels)] + rng.normal(size=(240, 16))
    assert linear_probe_accuracy(separable, labels) >= 0.97
    noise = rng.normal(size=(240, 16))
    random_acc = np.mean([linear_probe_accuracy(noise, rng.permutation(labels), seed=s) for s in range(3)])
    assert abs(random_acc - 0.25) < 0.1
    with pytest.raises(DataError, match=">= 2 examples"):
        linear_probe_accuracy(noise[:5], ["a", "a", "b", "c", "c"])
    with pytest.raises(DataError, match=r"\[N, D\]"):
        linear_probe_accuracy(noise[:4, 0], ["a", "b", "a", "b"])


def test_option_logliks_match_unpadded_token_by_token(shapes_vlm):
    model, processor = shapes_vlm
    tok = processor.tokenizer
    messages = diagnose.semantic_question("a plane figure with four equal sides", ["circle", "square"])
    options = ["circle", "square", "hexagon", "a"]
    got = option_logliks(model, processor, messages, options).sum
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    for option, value in zip(options, got):
        ids = prompt_ids + tok(option, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
        brute = sum(float(logp[t - 1, ids[t]]) for t in range(len(prompt_ids), len(ids)))
        assert value == pytest.approx(brute, abs=1e-4)


def test_vision_features_match_one_by_one(shapes_vlm, shapes_examples):
    model, processor = shapes_vlm
    examples = shapes_examples[:5]
    batched = diagnose.vision_features(model, processor, examples, batch_size=4)
    vision, connector = find_parts(model).vision, model.model.connector
    assert batched.shape == (5, model.config.text_config.hidden_size)
    for ex, row in zip(examples, batched):
        pixels = processor(text=["<image>"], images=[[load_image(ex.image)]],
                           return_tensors="pt")["pixel_values"][0]
        with torch.no_grad():
            single = connector(vision(pixel_values=pixels).last_hidden_state).mean((0, 1))
        np.testing.assert_allclose(row, single.numpy(), atol=1e-5)


def test_semantic_accuracy_records(shapes_vlm):
    model, processor = shapes_vlm
    descriptions = {"circle": "a round figure", "square": "four equal sides", "cross": "two bars"}
    acc, records = diagnose.semantic_accuracy(model, processor, descriptions, n_orders=2, seed=1)
    assert len(records) == 6 and sorted({r["class"] for r in records}) == sorted(descriptions)
    for r in records:
        assert sorted(r["options"]) == sorted(descriptions)
        assert r["answer"] == r["options"][int(np.argmax(r["logliks"]))]
    assert acc == pytest.approx(np.mean([r["answer"] == r["class"] for r in records]))
    again, _ = diagnose.semantic_accuracy(model, processor, descriptions, n_orders=2, seed=1)
    assert again == acc


@pytest.mark.skipif(not wordnet_available(), reason="WordNet (wordnet-base) not installed")
def test_class_descriptions_from_wordnet_or_given():
    got = diagnose.class_descriptions(["circle", "blorp"], {"blorp": "a made-up thing"})
    assert got["circle"] == open_wordnet().synsets("circle", pos="n")[0].definition()
    assert got["blorp"] == "a made-up thing"
    with pytest.raises(DataError, match="blorp"):
        diagnose.class_descriptions(["blorp"])


@pytest.mark.skipif(not wordnet_available(), reason="WordNet (wordnet-base) not installed")
def test_run_diagnosis_smoke(tmp_path, domains_suite):
    result = run_diagnosis("tiny:idefics3", domains_suite / "shapes", tmp_path, shots=1, n_per_domain=1)
    rows = result.rows
    assert [r["domain"] for r in rows] == ["cartoon", "noisy", "photo", "sketch"]
    for r in rows:
        assert r["n_classes"] == 8 and r["n_images"] == 24 and r["verdict"] in VERDICTS
        assert 0 <= r["probe_acc"] <= 1 and 0 <= r["semantic_acc"] <= 1
    assert json.loads((tmp_path / "diagnosis.json").read_text())["rows"] == json.loads(json.dumps(rows))
    assert "| photo | 8 |" in (tmp_path / "diagnosis.md").read_text()
