"""Chat prompts of a local model (`models.chat.encode_chats`): the same generation batch as the
collator's prompt-only batch, which training and the earlier evaluation path use."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from robustvlm.data.collate import VLMCollator, chat_messages
from robustvlm.data.images import load_image
from robustvlm.errors import ConfigError
from robustvlm.models.chat import ChatPrompt, encode_chats


@pytest.mark.parametrize("kind", ["idefics3", "llava"])
def test_encode_chats_equals_the_collators_generation_batch(kind, tiny_vlms, shapes_examples):
    _, processor = tiny_vlms(kind)
    longer = "A much longer instruction, so that the prompts differ in length here."
    examples = [shapes_examples[0], replace(shapes_examples[5], instruction=longer), shapes_examples[9]]
    collated = VLMCollator(processor, {}, train=False)(examples)
    prompts = [ChatPrompt(chat_messages(ex.instruction, image=True), [load_image(ex.image)], record=ex.id)
               for ex in examples]
    encoded = encode_chats(processor, prompts)
    for key, value in encoded.items():
        if torch.is_tensor(value):
            torch.testing.assert_close(value, collated[key], msg=f"{kind}: {key} differs")
    assert encoded["attention_mask"][:, 0].tolist() != [1, 1, 1]  # left-padded


def test_a_processor_without_chat_template_is_a_config_error():
    class NoTemplate:
        chat_template = None

    with pytest.raises(ConfigError, match="no chat template"):
        encode_chats(NoTemplate(), [ChatPrompt([{"role": "user", "content": "hi"}])])
