"""The blind backend hands every operation blind inputs: text-only prompts for families that read
prompts, blank images of the same size for those that need an image."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import Backend
from robustvlm.models.blind import BLANK_IMAGE, TEXT_ONLY, BlindBackend, blind_input, text_only
from robustvlm.models.chat import ChatPrompt
from robustvlm.models.loglik import OptionScores


class Recorder(Backend):
    """A backend of `family` that records what it is asked."""

    def __init__(self, family: str):
        self.name, self.family, self.model, self.processor = "rec", family, None, None  # type: ignore[assignment]
        self.seen: list[Any] = []

    @classmethod
    def load(cls, ref: ModelRef, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        raise NotImplementedError

    def generate_chats(self, prompts: Sequence[ChatPrompt], *, max_new_tokens: int, repetition_penalty: float) -> list[str]:
        self.seen += list(prompts)
        return ["x"] * len(prompts)

    def option_logliks(self, messages: list[dict], continuations: Sequence[str], **options: Any) -> OptionScores:
        self.seen.append((messages, options))
        return OptionScores([0.0], [0.0], [1])

    def embed_queries(self, images: list[Image.Image], questions: Sequence[str], **options: Any) -> np.ndarray:
        self.seen += images
        return np.zeros((len(images), 2))


PHOTO = Image.new("RGB", (20, 12), (200, 30, 40))
MESSAGES = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what?"}]},
            {"role": "assistant", "content": "a cat"}]


def test_text_only_drops_the_image_entries_and_keeps_the_rest():
    assert text_only(MESSAGES) == [{"role": "user", "content": [{"type": "text", "text": "what?"}]},
                                   {"role": "assistant", "content": "a cat"}]
    assert MESSAGES[0]["content"][0] == {"type": "image"}  # the caller's messages are left alone


def test_a_prompt_reading_family_gets_text_only_prompts():
    inner = Recorder("vlm")
    blind = BlindBackend(inner)
    blind.generate_chats([ChatPrompt(MESSAGES, [PHOTO], "r1")], max_new_tokens=2, repetition_penalty=1.0)
    blind.option_logliks(MESSAGES, ["A", "B"], images=[PHOTO], record="r2")
    prompt, (messages, options) = inner.seen
    assert prompt.images == [] and prompt.messages == text_only(MESSAGES) and prompt.record == "r1"
    assert messages == text_only(MESSAGES) and options == {"images": [], "record": "r2"}
    assert blind_input("vlm") == blind_input("openai") == TEXT_ONLY


def test_a_family_that_needs_an_image_gets_a_blank_one_of_the_same_size():
    inner = Recorder("clip")
    BlindBackend(inner).embed_queries([PHOTO], ["what?"])
    (image,) = inner.seen
    assert image.size == PHOTO.size and np.asarray(image).max() == 0
    assert blind_input("clip") == blind_input("siglip") == BLANK_IMAGE


def test_an_encoded_batch_cannot_be_made_blind():
    with pytest.raises(ConfigError, match="chat prompts"):
        BlindBackend(Recorder("vlm")).generate({"input_ids": None})
