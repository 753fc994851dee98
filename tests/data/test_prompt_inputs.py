"""Processor outputs -> model inputs, the same way for every architecture (`data.prompt_inputs`)."""

from __future__ import annotations

import torch
from PIL import Image

from robustvlm.data.collate import IGNORE_INDEX, VLMCollator
from robustvlm.data.prompt_inputs import (
    appended_token_values,
    processor_tensors,
    repeat_batch_of_one,
)
from robustvlm.data.records import Example


def test_processor_tensors_keep_forward_inputs_only():
    encoded = {"input_ids": torch.ones(1, 3), "labels": torch.ones(1, 3), "note": "x", "pixel_values": torch.ones(1, 2)}
    assert set(processor_tensors(encoded)) == {"input_ids", "pixel_values"}


def test_repeat_batch_of_one_repeats_batch_leading_and_flattened_inputs():
    inputs = {"input_ids": torch.tensor([[1, 2, 3]]), "pixel_values": torch.arange(8.0).reshape(4, 2),
              "image_grid_thw": torch.tensor([[1, 2, 2]])}
    out = repeat_batch_of_one(inputs, 3)
    assert torch.equal(out["input_ids"], torch.tensor([[1, 2, 3]] * 3))
    assert torch.equal(out["pixel_values"], torch.cat([inputs["pixel_values"]] * 3))  # 4 patches per copy
    assert torch.equal(out["image_grid_thw"], torch.tensor([[1, 2, 2]] * 3))


def test_paligemma_replies_are_causal_in_training_batches(tiny_vlms):
    """PaliGemma's prefix-LM attends bidirectionally where token_type_ids is 0: reply tokens
    get 1, so no reply position sees the tokens it must predict."""
    model, processor = tiny_vlms("paligemma")
    assert appended_token_values(processor) == {"token_type_ids": 1}
    assert appended_token_values(tiny_vlms("idefics3")[1]) == {}
    example = Example(id="a", image=Image.new("RGB", (64, 64), "red"), instruction="Which shape is shown?",
                      target="a small blue circle", env="")
    batch = VLMCollator(processor, {}, image_loader=lambda ref, **_: ref)([example])
    reply = batch["labels"][0] != IGNORE_INDEX
    assert torch.equal(batch["token_type_ids"][0].bool(), reply)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "pixel_values", "token_type_ids")}
    last = int(reply.nonzero()[-1])  # the end-of-turn token closing the reply
    changed = dict(inputs, input_ids=inputs["input_ids"].clone())
    changed["input_ids"][0, last] = int(inputs["input_ids"][0, last - 1])
    with torch.no_grad():
        before, after = (model(**x).logits[0, :last] for x in (inputs, changed))  # no dropout at toy size
    torch.testing.assert_close(before, after, atol=0, rtol=0)
