"""Failure diagnosis measurements: option log-likelihoods, vision features, semantic accuracy and
class descriptions (the verdict table and probe: tests/analysis/test_diagnosis.py; the run:
tests/workflows/measure/test_diagnose.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robustvlm.data.images import load_image
from robustvlm.data.wordnet import open_wordnet, wordnet_available
from robustvlm.errors import DataError
from robustvlm.evaluation import diagnose
from robustvlm.models import find_parts
from robustvlm.models.loglik import option_logliks

torch.set_num_threads(1)


def test_option_logliks_match_unpadded_token_by_token(shapes_backend):
    model, processor = shapes_backend.model, shapes_backend.processor
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


def test_vision_features_match_one_by_one(shapes_backend, shapes_examples):
    model, processor = shapes_backend.model, shapes_backend.processor
    examples = shapes_examples[:5]
    batched = diagnose.vision_features(shapes_backend, examples, batch_size=4)
    vision, connector = find_parts(model).vision, model.model.connector
    assert batched.shape == (5, model.config.text_config.hidden_size)
    for ex, row in zip(examples, batched):
        pixels = processor(text=["<image>"], images=[[load_image(ex.image)]],
                           return_tensors="pt")["pixel_values"][0]
        with torch.no_grad():
            single = connector(vision(pixel_values=pixels).last_hidden_state).mean((0, 1))
        np.testing.assert_allclose(row, single.numpy(), atol=1e-5)


def test_semantic_accuracy_records(shapes_backend):
    descriptions = {"circle": "a round figure", "square": "four equal sides", "cross": "two bars"}
    acc, records = diagnose.semantic_accuracy(shapes_backend, descriptions, n_orders=2, seed=1)
    assert len(records) == 6 and sorted({r["class"] for r in records}) == sorted(descriptions)
    for r in records:
        assert sorted(r["options"]) == sorted(descriptions)
        assert r["answer"] == r["options"][int(np.argmax(r["logliks"]))]
    assert acc == pytest.approx(np.mean([r["answer"] == r["class"] for r in records]))
    again, _ = diagnose.semantic_accuracy(shapes_backend, descriptions, n_orders=2, seed=1)
    assert again == acc


@pytest.mark.skipif(not wordnet_available(), reason="WordNet (wordnet-base) not installed")
def test_class_descriptions_from_wordnet_or_given():
    got = diagnose.class_descriptions(["circle", "blorp"], {"blorp": "a made-up thing"})
    assert got["circle"] == open_wordnet().synsets("circle", pos="n")[0].definition()
    assert got["blorp"] == "a made-up thing"
    with pytest.raises(DataError, match="blorp"):
        diagnose.class_descriptions(["blorp"])


@pytest.mark.skipif(not wordnet_available(), reason="WordNet (wordnet-base) not installed")
def test_every_fashion_mnist_class_has_a_description():
    """WordNet has no "ankle boot" (it is described as its head noun, a boot) and spells
    "T-shirt" with its hyphen."""
    from robustvlm.data.real_images import FASHION_CLASSES

    wn = open_wordnet()
    got = diagnose.class_descriptions(FASHION_CLASSES)
    assert got["ankle boot"] == wn.synset("boot.n.01").definition()
    assert got["t-shirt"] == wn.synsets("T-shirt", pos="n")[0].definition()
    assert got["sneaker"] == wn.synsets("sneaker", pos="n")[0].definition()
