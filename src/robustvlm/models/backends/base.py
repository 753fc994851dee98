"""The interface of every backend family: a loaded model, its processor and the operations the
family declares (`models.backends.BACKENDS`); an operation a family does not declare is a ConfigError."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.chat import ChatPrompt, check_multi_image, encode_chats
from robustvlm.models.generate import generate_batch
from robustvlm.models.loglik import OptionScores, option_logliks
from robustvlm.models.reward import RewardModel, candidate_rewards
from robustvlm.models.text_encoder import tower_text_embeddings
from robustvlm.models.vision import VisionTowerEmbedder

CAPABILITIES = ("generate", "option_loglik", "image_embed", "text_embed", "reward")


class Backend(ABC):
    """A loaded model (eval mode) and its processor, with the operations of its family.

    Attributes:
        name: the hub name, folder or "tiny:..." name it was loaded by.
        family: its key in `BACKENDS`.
        model, processor: the loaded model and processor.
        class_templates: the texts holding "{class}" that zero-shot classification by
            similarity fills with class names; None: the scorer's default.
    """

    class_templates: tuple[str, ...] | None = None

    def __init__(self, name: str, family: str, model: torch.nn.Module, processor: Any):
        self.name, self.family, self.processor = name, family, processor
        self.model = model.eval()

    @classmethod
    @abstractmethod
    def load(cls, ref: ModelRef, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        """Load `ref` as this family (arguments: see `load_backend`)."""

    @property
    def capabilities(self) -> frozenset[str]:
        """The operations its family declares (`BACKENDS`)."""
        from robustvlm.models.backends import BACKENDS  # the registry imports the families lazily

        return BACKENDS[self.family].capabilities

    def supports(self, *capabilities: str) -> bool:
        """True when the family declares every one of `capabilities`."""
        unknown = set(capabilities) - set(CAPABILITIES)
        if unknown:
            raise ConfigError(f"unknown capabilities {sorted(unknown)}; known: {list(CAPABILITIES)}")
        return set(capabilities) <= self.capabilities

    def require(self, *capabilities: str) -> None:
        """Raise ConfigError naming the model, its family and what it supports unless it
        supports every one of `capabilities`."""
        if not self.supports(*capabilities):
            missing = [c for c in capabilities if c not in self.capabilities]
            raise ConfigError(
                f"model '{self.name}' (family '{self.family}') does not support {', '.join(missing)}; "
                f"it supports {', '.join(c for c in CAPABILITIES if c in self.capabilities)}"
            )

    # Each operation's keyword options are those of the model operation it calls.

    def generate(self, batch: dict[str, Any], **options: Any) -> list[str]:
        """Greedy replies to a left-padded generation batch, one per row
        (`models.generate.generate_batch`: max_new_tokens, repetition_penalty)."""
        self.require("generate")
        return generate_batch(self.model, self.processor, batch, **options)

    def generate_chats(
        self, prompts: Sequence[ChatPrompt], *, max_new_tokens: int, repetition_penalty: float
    ) -> list[str]:
        """Greedy replies to chat prompts, one per prompt, in order (one left-padded batch)."""
        self.require("generate")
        return generate_batch(self.model, self.processor, encode_chats(self.processor, prompts),
                              max_new_tokens=max_new_tokens, repetition_penalty=repetition_penalty)

    def check_multi_image(self) -> None:
        """ConfigError unless the model takes several images in one prompt."""
        check_multi_image(self.processor)

    @property
    def usage(self) -> Mapping[str, int] | None:
        """The live counts of a served model's requests, cache hits and tokens (None: a local model)."""
        return None

    def track_usage(self, sink: Callable[[Mapping[str, int]], None]) -> None:
        """Give a served model's counts to `sink` at every change (`runs.usage_recorder`); a local
        model sends no request and records nothing."""
        return None

    def option_logliks(self, messages: list[dict], continuations: Sequence[str], **options: Any) -> OptionScores:
        """Log-likelihoods (nats) of K continuations of a chat prompt
        (`models.loglik.option_logliks`: images, shared_prefix, record)."""
        self.require("option_loglik")
        return option_logliks(self.model, self.processor, messages, continuations, **options)

    def embed_images(self, images: list[Image.Image], **options: Any) -> np.ndarray:
        """Image embeddings, float32 [n, d], unit-norm unless `normalize=False`
        (`models.vision.VisionTowerEmbedder`: batch_size, normalize)."""
        self.require("image_embed")
        return VisionTowerEmbedder(self.model, self.processor, **options)(images)

    def embed_queries(self, images: list[Image.Image], questions: Sequence[str], **options: Any) -> np.ndarray:
        """Embeddings [n, d] of images asked `questions` about, for similarity scoring. A dual
        encoder's image tower reads no text: its image embeddings (`embed_images`)."""
        return self.embed_images(images, **options)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm text embeddings, float32 [n, d], from a dual encoder's text tower
        (`models.text_encoder.tower_text_embeddings`)."""
        self.require("text_embed")
        return tower_text_embeddings(self.model, self.processor, texts).cpu().numpy()

    def rewards(self, query: str, responses: Sequence[str], **options: Any) -> list[float]:
        """Rewards of K responses to a query (`models.reward.candidate_rewards`: image,
        shared_prefix, record)."""
        self.require("reward")
        # the families declaring "reward" load a RewardModel (RewardBackend)
        return candidate_rewards(cast(RewardModel, self.model), self.processor, query, responses, **options)
