"""Blind scoring: the same model asked the same prompts with the image removed.

`BlindBackend` wraps any loaded backend (local or served) and hands its operations blind inputs,
so every scorer (generation, option log-likelihood, similarity) runs unchanged:

- a family that reads text-only prompts (generative VLMs, served models) gets the prompt as the
  family builds a text-only prompt: the chat messages without their `{"type": "image"}` entries
  and no images (`text_only`);
- a family that needs an image in every prompt (dual encoders and embedding models, which score
  by the image's embedding) gets a blank image of the same size instead of each image
  (`blank_like`: black, RGB).

`blind_input(family)` names which of the two a family gets; runs write it beside their blind
figures. The vision gain (normal minus blind) is `analysis.vision_gain`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import BACKENDS, Backend
from robustvlm.models.chat import ChatPrompt
from robustvlm.models.loglik import OptionScores

TEXT_ONLY = "text-only prompt (image removed)"
BLANK_IMAGE = "blank image of the same size (the family needs an image in every prompt)"
PROMPT_READERS = frozenset({"generate", "option_loglik"})  # operations that read a chat prompt


def needs_image(family: str) -> bool:
    """True for a family that scores by the image's embedding and so needs an image in every
    prompt (it reads no chat prompt: no `generate`, no `option_loglik`)."""
    return not BACKENDS[family].capabilities & PROMPT_READERS


def blind_input(family: str) -> str:
    """What a blind run of `family` gets instead of the image: TEXT_ONLY or BLANK_IMAGE."""
    return BLANK_IMAGE if needs_image(family) else TEXT_ONLY


def blank_like(image: Image.Image) -> Image.Image:
    """A black RGB image of `image`'s size."""
    return Image.new("RGB", image.size)


def text_only(messages: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Chat messages without their image entries (string contents kept as they are)."""
    out = []
    for message in messages:
        content = message["content"]
        if not isinstance(content, str):
            content = [part for part in content if part.get("type") != "image"]
        out.append({**message, "content": content})
    return out


class BlindBackend(Backend):
    """`inner` asked blind (module docstring); every other operation is `inner`'s own."""

    def __init__(self, inner: Backend):
        self.inner, self.name, self.family = inner, inner.name, inner.family
        self.model, self.processor = inner.model, inner.processor
        self.class_templates = inner.class_templates
        self.blank = needs_image(inner.family)

    @classmethod
    def load(cls, ref: ModelRef, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        raise ConfigError("a blind backend wraps a loaded one: BlindBackend(load_backend(...))")

    def _prompt(self, prompt: ChatPrompt) -> ChatPrompt:
        if self.blank:
            return ChatPrompt(prompt.messages, [blank_like(i) for i in prompt.images], prompt.record)
        return ChatPrompt(text_only(prompt.messages), [], prompt.record)

    def generate_chats(
        self, prompts: Sequence[ChatPrompt], *, max_new_tokens: int, repetition_penalty: float
    ) -> list[str]:
        """`inner`'s replies to the blind prompts."""
        return self.inner.generate_chats([self._prompt(p) for p in prompts], max_new_tokens=max_new_tokens,
                                         repetition_penalty=repetition_penalty)

    def option_logliks(self, messages: list[dict], continuations: Sequence[str], **options: Any) -> OptionScores:
        """`inner`'s option log-likelihoods given the blind prompt."""
        blind = self._prompt(ChatPrompt(messages, list(options.pop("images", ()))))
        return self.inner.option_logliks(blind.messages, continuations, images=blind.images, **options)

    def embed_images(self, images: list[Image.Image], **options: Any) -> np.ndarray:
        """`inner`'s embeddings of blank images of the same sizes."""
        return self.inner.embed_images([blank_like(i) for i in images], **options)

    def embed_queries(self, images: list[Image.Image], questions: Sequence[str], **options: Any) -> np.ndarray:
        """`inner`'s query embeddings of blank images of the same sizes with the same questions."""
        return self.inner.embed_queries([blank_like(i) for i in images], questions, **options)

    def generate(self, batch: dict[str, Any], **options: Any) -> list[str]:
        raise ConfigError("blind scoring needs chat prompts: an encoded batch still holds its images")

    def check_multi_image(self) -> None:
        self.inner.check_multi_image()

    @property
    def usage(self) -> Mapping[str, int] | None:
        return self.inner.usage

    def track_usage(self, sink: Callable[[Mapping[str, int]], None]) -> None:
        self.inner.track_usage(sink)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_texts(texts)

    def rewards(self, query: str, responses: Sequence[str], **options: Any) -> list[float]:
        raise ConfigError("blind scoring applies to evaluation commands, not to reward models")
