"""Real-size random-weight models (`real:<name>`, models/real.py): published parameter counts,
the padded tokenizer, image tokens per crop, and the names every command accepts."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models import support
from robustvlm.models.backends import infer_family
from robustvlm.models.loading import load_vlm
from robustvlm.models.real import (
    REAL_MODELS,
    count_real_parameters,
    pad_vocabulary,
    real_config,
    real_spec,
)
from robustvlm.models.tiny import CHAT_TEMPLATE, train_tokenizer
from robustvlm.models.tiny_families import VLM_FAMILIES


@pytest.mark.parametrize("name", list(REAL_MODELS))
def test_parameter_count_matches_the_published_one(name):
    published = REAL_MODELS[name].published_parameters
    assert abs(count_real_parameters(ModelRef.real(name)) / published - 1) < 0.01


def test_qwen2_vl_count_equals_the_released_safetensors_size():
    # model.safetensors.index.json: total_size 4,417,971,200 bytes of bf16 weights
    assert count_real_parameters(ModelRef.parse("real:qwen2-vl-2b")) == 4_417_971_200 // 2


def test_padded_tokenizer_has_the_real_size_and_encodes_as_before():
    tokenizer = train_tokenizer(["a cat on a mat"], vocab_size=400, special_tokens=("<image>",))
    padded = pad_vocabulary(tokenizer, 5000)
    assert len(padded) == 5000
    text = "<|im_start|>user\n<image>What colour is the cat?<|im_end|>"
    assert padded(text).input_ids == tokenizer(text).input_ids
    assert padded.decode(padded(text).input_ids) == text
    assert padded.convert_tokens_to_ids("<image>") == tokenizer.convert_tokens_to_ids("<image>")
    with pytest.raises(ConfigError, match="exceed the vocabulary size 300"):
        pad_vocabulary(tokenizer, 300)


@pytest.mark.parametrize("name, side, tokens", [
    ("real:smolvlm-256m", 512, 64),       # model card: 64 visual tokens per 512x512 patch
    ("real:smolvlm-2.2b", 384, 81),       # model card: 81 visual tokens per 384x384 patch
    ("real:qwen2-vl-2b", 448, 256),       # (448 / 14 / 2)^2
])
def test_one_crop_has_the_published_image_token_count(name, side, tokens):
    spec = real_spec(ModelRef.parse(name))
    config, tokenizer = real_config(ModelRef.parse(name))
    family = VLM_FAMILIES[spec.kind]
    processor = spec.make_processor(tokenizer, config, CHAT_TEMPLATE.replace("{{ IMAGE }}", family.image_text), False)
    assert len(tokenizer) == spec.vocab_size == config.text_config.vocab_size
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    batch = processor(text=[text], images=[[Image.new("RGB", (side, side))]], return_tensors="pt")
    image_id = getattr(config, "image_token_id", None)
    assert int((batch["input_ids"] == image_id).sum()) == tokens


def test_real_names_are_known_to_the_model_registry():
    assert infer_family(ModelRef.parse("real:qwen2-vl-2b")) == "vlm"
    assert support.model_type_of(ModelRef.parse("real:llava-onevision-0.5b")) == "llava_onevision"
    with pytest.raises(ConfigError, match=r"unknown real-size model 'real:gpt'; known: \['real:smolvlm-256m'"):
        load_vlm(ModelRef.parse("real:gpt"))


@pytest.mark.slow
def test_smolvlm_256m_builds_and_runs_text_only():
    model, processor = load_vlm(ModelRef.parse("real:smolvlm-256m"), tiny_options={"seed": 3})
    again, _ = load_vlm(ModelRef.parse("real:smolvlm-256m"), tiny_options={"seed": 3})
    assert sum(p.numel() for p in model.parameters()) == count_real_parameters(ModelRef.parse("smolvlm-256m"))
    first = next(iter(model.state_dict().items()))
    assert torch.equal(first[1], again.state_dict()[first[0]])  # the seed fixes the weights
    ids = processor.tokenizer("What colour is the sky?", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], 49280) and torch.isfinite(logits).all()
