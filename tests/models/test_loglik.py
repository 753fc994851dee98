"""models.loglik on text-only prompts (images: see multiple_choice/test_generative.py): both ways against a brute
force, the shared cache as a stride-0 view, and the error for an empty continuation."""

from __future__ import annotations

import pytest
import torch

from robustvlm.errors import DataError
from robustvlm.models import build_tiny_vlm
from robustvlm.models.loglik import encode_prompt, option_logliks, run_shared_prefix

torch.set_num_threads(1)

MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "Which shape has four equal sides?"}]}]
OPTIONS = ["circle", "a square", "star", "x"]


@pytest.fixture(scope="module", params=["idefics3", "llava"])
def tiny_vlm(request):
    model, processor = build_tiny_vlm(request.param, seed=3, corpus=["Which shape has four equal sides?", *OPTIONS])
    return model.eval(), processor


def _brute_force(model, processor, option):
    """Prompt + option as one unpadded sequence, log-probs summed over the option's tokens."""
    tok = processor.tokenizer
    prompt = processor.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    prompt_ids = tok(prompt)["input_ids"]
    ids = prompt_ids + tok(option, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
    return sum(float(logp[t - 1, ids[t]]) for t in range(len(prompt_ids), len(ids))), len(ids) - len(prompt_ids)


def test_text_only_both_ways_match_brute_force(tiny_vlm):
    model, processor = tiny_vlm
    shared = option_logliks(model, processor, MESSAGES, OPTIONS)
    full = option_logliks(model, processor, MESSAGES, OPTIONS, shared_prefix=False)
    expected = [_brute_force(model, processor, o) for o in OPTIONS]
    assert len({n for _, n in expected}) > 1  # padding is exercised
    for got in (shared, full):
        assert got.n_tokens == [n for _, n in expected]
        assert got.sum == pytest.approx([s for s, _ in expected], abs=1e-4)
        assert got.mean == pytest.approx([s / n for s, n in expected], abs=1e-4)


def test_shared_prefix_cache_is_a_view_of_one_row(tiny_vlm):
    model, processor = tiny_vlm
    prefix = encode_prompt(processor, MESSAGES)
    with torch.no_grad():
        out = run_shared_prefix(model, prefix, 4, logits_to_keep=1)
    layers = out.past_key_values.layers
    assert all(layer.keys.shape[0] == 4 and layer.keys.stride(0) == 0 for layer in layers)
    assert out.logits.shape[:2] == (1, 1)


def test_empty_continuation_is_a_data_error(tiny_vlm):
    model, processor = tiny_vlm
    with pytest.raises(DataError, match="continuation of question 'q9' tokenises to nothing"):
        option_logliks(model, processor, MESSAGES, ["circle", ""], record="question 'q9'")
