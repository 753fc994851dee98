"""Model backends: load a model by name as a family and use the operations its family supports.

In the style of lmms-eval's model registry: `BACKENDS` maps a family to a `BackendSpec`, its
`Backend` class and the capabilities it declares (from `CAPABILITIES`). `load_backend` infers
the family from the name when not given (`infer_family`), loads the model in eval mode with its
processor and returns the family's Backend. Adding a family = one registry entry + its class
(which says how to load the model, and overrides an operation only where the family computes
it differently).

| family   | models                                               | capabilities                            |
|----------|------------------------------------------------------|-----------------------------------------|
| `vlm`    | image-text-to-text (Idefics3, LLaVA, Qwen2-VL, ...)  | generate, option_loglik, image_embed    |
| `clip`   | CLIP dual encoders                                   | image_embed, text_embed                 |
| `siglip` | SigLIP dual encoders                                 | image_embed, text_embed                 |
| `reward` | reward models (a VLM + scalar head, `models.reward`) | reward |
| `vlm2vec-vqa`, `vlm2vec-caption`, `vlm2vec-mixed` | a VLM as an embedding model (VLM2Vec), trained on VQA pairs, caption pairs or both | image_embed, text_embed |
| `openai` | a model behind an OpenAI-compatible server, "openai:MODEL" (`models.served`) | generate, option_loglik (where the server returns prompt log-probabilities) |

A folder holding a family's marker file (a reward model's `reward_head.safetensors`) is that
family; a folder written by `robustvlm embed train` names its family in its `embedding.json`.
A served model ("openai:MODEL") needs the server's settings (`ServedConfig`: --base-url, ...).
The operations (`Backend.generate`, `generate_chats`, `option_logliks`, `embed_images`, `embed_queries`,
`embed_texts`, `rewards`) call the model operations of `models.generate`, `models.loglik`,
`models.vision`, `models.text_encoder`, `models.embedding` and `models.reward`; asking a backend
for one its family does not declare is a ConfigError naming the model, its family and what it
supports.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from PIL import Image
from transformers import AutoConfig, AutoModel, AutoProcessor

from robustvlm.config import ServedConfig
from robustvlm.errors import ConfigError
from robustvlm.models.chat import ChatPrompt, check_multi_image, encode_chats
from robustvlm.models.embedding import EMBEDDING_FAMILIES, Embedder, EmbeddingSpec
from robustvlm.models.generate import generate_batch
from robustvlm.models.loading import LOAD_ERRORS, TINY_PREFIX, load_vlm
from robustvlm.models.loglik import OptionScores, option_logliks
from robustvlm.models.real import REAL_PREFIX, real_spec
from robustvlm.models.reward import (
    HEAD_FILE,
    META_FILE,
    RewardModel,
    candidate_rewards,
    load_reward_model,
)
from robustvlm.models.served import SERVED_PREFIX, ServedModel
from robustvlm.models.text_encoder import tower_text_embeddings
from robustvlm.models.tiny_clip import DUAL_ENCODER_KINDS, build_tiny_dual_encoder
from robustvlm.models.tiny_families import VLM_FAMILIES as TINY_VLMS
from robustvlm.models.vision import VisionTowerEmbedder
from robustvlm.models.zoo_recipes import resolve_model_name

CAPABILITIES = ("generate", "option_loglik", "image_embed", "text_embed", "reward")
DEFAULT_FAMILY = "vlm"  # the family of a model whose type no other family claims


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
    def load(cls, name: str, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        """Load `name` as this family (arguments: see `load_backend`)."""

    @property
    def capabilities(self) -> frozenset[str]:
        """The operations its family declares (`BACKENDS`)."""
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


class VLMBackend(Backend):
    """A generative image-text-to-text model (`models.loading.load_vlm`)."""

    @classmethod
    def load(cls, name: str, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        model, processor = load_vlm(name, corpus=corpus, trust_remote_code=trust_remote_code)
        return cls(name, family, model, processor)


class DualEncoderBackend(Backend):
    """A CLIP- or SigLIP-style dual encoder (`AutoModel`; "tiny:clip" / "tiny:siglip" offline)."""

    @classmethod
    def load(cls, name: str, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        if name.startswith(TINY_PREFIX):
            model, processor = build_tiny_dual_encoder(name[len(TINY_PREFIX):], corpus=corpus or ())
            return cls(name, family, model, processor)
        kwargs = {"trust_remote_code": True} if trust_remote_code else {}
        try:
            model, processor = AutoModel.from_pretrained(name, **kwargs), AutoProcessor.from_pretrained(name, **kwargs)
        except LOAD_ERRORS as exc:
            raise ConfigError(f"cannot load dual encoder '{name}': {exc}") from exc
        return cls(name, family, model, processor)


class RewardBackend(Backend):
    """A reward model saved by `models.reward.save_reward_model` ("tiny:<kind>" / "real:<name>":
    a tiny or real-size random VLM with a fresh head). `meta` holds its reward_model.json ({} for a tiny one)."""

    meta: dict[str, Any] = {}

    @classmethod
    def load(cls, name: str, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        if name.startswith((TINY_PREFIX, REAL_PREFIX)):
            vlm, processor = load_vlm(name, corpus=corpus)
            return cls(name, family, RewardModel(vlm), processor)
        model, processor = load_reward_model(name, trust_remote_code=trust_remote_code)
        backend = cls(name, family, model, processor)
        backend.meta = json.loads((Path(name) / META_FILE).read_text(encoding="utf-8"))
        return backend


class EmbeddingBackend(Backend):
    """A VLM used as an embedding model (`models.embedding`): queries and texts are the
    last-layer state of their last token. A folder from `robustvlm embed train` brings its
    `embedding.json`; any other model (e.g. a VLM2Vec checkpoint from the hub) is embedded the
    VLM2Vec way: VQA-style families with the question, `vlm2vec-caption` with the image alone."""

    def __init__(self, name: str, family: str, model: torch.nn.Module, processor: Any, spec: EmbeddingSpec):
        super().__init__(name, family, model, processor)
        self.spec = spec
        self.class_templates = spec.class_templates

    @classmethod
    def load(cls, name: str, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        spec = EmbeddingSpec.read(name) if Path(name).is_dir() else None
        if spec is None:
            spec = EmbeddingSpec.for_family(family)
        model, processor = load_vlm(name, corpus=corpus, trust_remote_code=trust_remote_code)
        return cls(name, family, model, processor, spec)

    def _embedder(self, options: dict[str, Any]) -> Embedder:
        return Embedder(self.model, self.processor, self.spec, **options)

    def embed_images(self, images: list[Image.Image], **options: Any) -> np.ndarray:
        """Unit-norm embeddings [n, d] of the images alone (`models.embedding.Embedder`: batch_size)."""
        self.require("image_embed")
        return self._embedder(options).queries(images)

    def embed_queries(self, images: list[Image.Image], questions: Sequence[str], **options: Any) -> np.ndarray:
        """Unit-norm embeddings [n, d] of each image with its question (the image alone for a
        model whose queries hold no question)."""
        self.require("image_embed")
        return self._embedder(options).queries(images, questions)

    def embed_texts(self, texts: Sequence[str], **options: Any) -> np.ndarray:
        """Unit-norm embeddings [n, d] of texts (answers, captions, class names)."""
        self.require("text_embed")
        return self._embedder(options).texts(texts)


class ServedBackend(Backend):
    """A model behind an OpenAI-compatible server (`models.served.ServedModel`): no weights here.
    A served model decodes at temperature 0, as a local one decodes greedily; a repetition
    penalty other than 1.0 is sent to the server, which must apply it or refuse it."""

    def __init__(self, name: str, family: str, served: ServedModel):
        self.name, self.family, self.served = name, family, served
        # no weights here: the operations reading `model` are refused or overridden
        self.model = self.processor = None  # type: ignore[assignment]

    @classmethod
    def load(cls, name: str, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        raise ConfigError(f"model '{name}' is served: give its server's address (--base-url URL)")

    @classmethod
    def connect(cls, name: str, family: str, config: ServedConfig) -> ServedBackend:
        """The backend of "openai:MODEL" at the server `config` names."""
        return cls(name, family, ServedModel(name, config))

    def generate_chats(
        self, prompts: Sequence[ChatPrompt], *, max_new_tokens: int, repetition_penalty: float
    ) -> list[str]:
        """Greedy replies from the server, one per prompt (see the class docstring)."""
        return self.served.generate(prompts, max_new_tokens=max_new_tokens, repetition_penalty=repetition_penalty)

    def check_multi_image(self) -> None:
        """A chat-completions request may hold several images; a server that refuses them fails
        the request with its own message."""

    @property
    def usage(self) -> Mapping[str, int] | None:
        return self.served.usage

    def track_usage(self, sink: Callable[[Mapping[str, int]], None]) -> None:
        self.served.track_usage(sink)

    def option_logliks(self, messages: list[dict], continuations: Sequence[str], **options: Any) -> OptionScores:
        """Log-likelihoods from the server's prompt log-probabilities (`ServedModel.option_logliks`:
        images, record; `shared_prefix` is the server's business: its prefix cache)."""
        options.pop("shared_prefix", None)
        return self.served.option_logliks(messages, continuations, **options)

    def generate(self, batch: dict[str, Any], **options: Any) -> list[str]:
        raise ConfigError(f"model '{self.name}' is served: it answers chat prompts, not token batches")


@dataclass(frozen=True)
class BackendSpec:
    """A family of the registry.

    Attributes:
        backend: its Backend class (loading and the operations it implements).
        capabilities: the operations it supports, from CAPABILITIES.
        model_types: prefixes of the HF config `model_type` (and of the "tiny:" kind) that
            make a model this family; none for the default family.
        marker: a file whose presence in a model folder makes the folder this family.
    """

    backend: type[Backend]
    capabilities: frozenset[str]
    model_types: tuple[str, ...] = ()
    marker: str | None = None


BACKENDS: dict[str, BackendSpec] = {
    "vlm": BackendSpec(VLMBackend, frozenset({"generate", "option_loglik", "image_embed"})),
    "clip": BackendSpec(DualEncoderBackend, frozenset({"image_embed", "text_embed"}), ("clip",)),
    "siglip": BackendSpec(DualEncoderBackend, frozenset({"image_embed", "text_embed"}), ("siglip",)),
    "reward": BackendSpec(RewardBackend, frozenset({"reward"}), marker=HEAD_FILE),
    **{
        family: BackendSpec(EmbeddingBackend, frozenset({"image_embed", "text_embed"}))
        for family in EMBEDDING_FAMILIES.values()
    },
    "openai": BackendSpec(ServedBackend, frozenset({"generate", "option_loglik"})),
}
SERVED_FAMILY = "openai"


def infer_family(name: str, *, trust_remote_code: bool = False) -> str:
    """The family of a model: the one whose marker file its folder holds (a reward model), or
    the one its folder's `embedding.json` names (a model from `robustvlm embed train`), else the
    one whose `model_types` prefixes its config's `model_type` (for "tiny:<kind>", the kind:
    "tiny:clip" is a CLIP; an unknown kind is a ConfigError; for "real:<name>", its architecture),
    else DEFAULT_FAMILY; "openai:MODEL"
    is a served model."""
    if name.startswith(SERVED_PREFIX):
        return SERVED_FAMILY
    name = resolve_model_name(name)
    for family, spec in BACKENDS.items():
        if spec.marker and (Path(name) / spec.marker).is_file():
            return family
    embedding = EmbeddingSpec.read(name) if Path(name).is_dir() else None
    if embedding is not None:
        return embedding.family
    if name.startswith(TINY_PREFIX):
        model_type = name[len(TINY_PREFIX):]
        if model_type not in (*TINY_VLMS, *DUAL_ENCODER_KINDS):
            raise ConfigError(f"unknown tiny model '{name}'; known: "
                              f"{[TINY_PREFIX + k for k in (*sorted(TINY_VLMS), *DUAL_ENCODER_KINDS)]}")
    elif name.startswith(REAL_PREFIX):
        model_type = real_spec(name).kind
    else:
        kwargs = {"trust_remote_code": True} if trust_remote_code else {}
        try:
            model_type = str(AutoConfig.from_pretrained(name, **kwargs).model_type)
        except LOAD_ERRORS as exc:
            raise ConfigError(f"cannot read the config of model '{name}' to infer its family: {exc}") from exc
    for family, spec in BACKENDS.items():
        if any(model_type.startswith(prefix) for prefix in spec.model_types):
            return family
    return DEFAULT_FAMILY


def generative_family(name: str) -> str:
    """The family of a model that generates: a served one for "openai:MODEL", else DEFAULT_FAMILY
    (no config is read)."""
    return SERVED_FAMILY if name.startswith(SERVED_PREFIX) else DEFAULT_FAMILY


SERVER_MAY_DIFFER = "server.base_url"


def served_settings(names: str | Sequence[str], served: ServedConfig | None) -> dict[str, Any]:
    """What a run folder records of the server: {"server": {"base_url": ...}} when one of `names`
    is a served model, else {} (no key, no request policy). The model name is what identifies a
    served model: a resumed run may reach it at another address (SERVER_MAY_DIFFER).

    Raises ConfigError, before any folder is claimed, for a served model without a server and for
    a server given to no served model."""
    names = [names] if isinstance(names, str) else list(names)
    is_served = [n for n in names if n.startswith(SERVED_PREFIX)]
    if is_served and served is None:
        raise ConfigError(f"model '{is_served[0]}' is served: give its server's address (--base-url URL)")
    if served is not None and not is_served:
        raise ConfigError(f"--base-url is for a served model ({SERVED_PREFIX}MODEL); no --model names one")
    return {"server": {"base_url": served.base_url}} if served is not None else {}


def load_backend(
    name: str, family: str | None = None, *, corpus: list[str] | None = None, trust_remote_code: bool = False,
    served: ServedConfig | None = None,
) -> Backend:
    """Load a model and its processor as a Backend.

    Args:
        name: hub name, local folder, or "tiny:<kind>" (built offline: a VLM architecture of
            `models.support`, e.g. "tiny:qwen2_vl", or "tiny:clip" / "tiny:siglip"), "zoo:NAME"
            (a built member of the model zoo, `models.zoo_recipes`) or "real:<name>" (a released
            architecture at real size, random weights; `models.real`).
        family: a key of BACKENDS; None infers it (`infer_family`).
        corpus: tokenizer training text for "tiny:" models (ignored for others).
        trust_remote_code: passed to transformers only when True.
        served: the server of a served model ("openai:MODEL"); needed for one, unused by others.

    Raises ConfigError for an unknown family or a model that cannot be loaded.
    """
    name = resolve_model_name(name)
    family = family or infer_family(name, trust_remote_code=trust_remote_code)
    if family not in BACKENDS:
        raise ConfigError(f"model '{name}': family must be one of {list(BACKENDS)}, got '{family}'")
    if family == SERVED_FAMILY and served is not None:
        return ServedBackend.connect(name, family, served)
    return BACKENDS[family].backend.load(name, family, corpus=corpus, trust_remote_code=trust_remote_code)
