"""A VLM as an embedding model (VLM2Vec): the last layer's state at the last real token, L2-normalised.

A query is one user turn of the chat template — the image, then either the instruction
`query_template` filled with a question (VQA-style, e.g. "Represent the given image with the
following question: What digit is shown?") or no text at all (caption-style: the image alone) —
followed by the generation prompt; a target (answer, caption, class name) is a text-only user
turn rendered the same way. Sequences are right-padded, so every real token keeps its position
and an embedding does not depend on its batch. The embedding is the backbone's final hidden
state (after its last norm, before the LM head) at the last non-padding position.

A model trained by `robustvlm embed train` carries `embedding.json` (`EmbeddingSpec`) in its
folder: its backend family, whether it embeds queries with or without the question, the query
template and the class-name templates zero-shot classification fills.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from robustvlm.config import QUERY_TEMPLATE
from robustvlm.data.collate import VLMCollator
from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError
from robustvlm.models.answer import get_backbone, last_token_index, model_inputs

SPEC_FILE = "embedding.json"
QUESTION_SLOT = "{question}"
#: what a model's queries hold: "question" (image + instruction) or "image" (the image alone)
QUERY_STYLES = ("question", "image")


#: The backend family of a model trained on VQA pairs only, caption pairs only, or both.
EMBEDDING_FAMILIES = {"vqa": "vlm2vec-vqa", "caption": "vlm2vec-caption", "mixed": "vlm2vec-mixed"}


@dataclass(frozen=True)
class EmbeddingSpec:
    """How a trained embedding model embeds (the `embedding.json` of its folder).

    Attributes:
        family: its backend family (`models.backends.BACKENDS`), e.g. "vlm2vec-vqa".
        query_style: "question" (image + `query_template` filled with the question) or "image"
            (the image alone; a question given at inference is not shown).
        query_template: the instruction around a question; holds "{question}".
        class_templates: texts holding "{class}" that zero-shot classification embeds per
            class name and averages (a template ensemble).
    """

    family: str
    query_style: str = "question"
    query_template: str = QUERY_TEMPLATE
    class_templates: tuple[str, ...] = ("{class}",)

    def __post_init__(self) -> None:
        if self.query_style not in QUERY_STYLES:
            raise ConfigError(f"query_style must be one of {QUERY_STYLES}, got {self.query_style!r}")
        if QUESTION_SLOT not in self.query_template:
            raise ConfigError(f"query_template must hold {QUESTION_SLOT}, got {self.query_template!r}")
        if not self.class_templates or any("{class}" not in t for t in self.class_templates):
            raise ConfigError(f"class_templates must be non-empty and hold '{{class}}', got {list(self.class_templates)}")

    @classmethod
    def for_family(cls, family: str, **settings: Any) -> EmbeddingSpec:
        """The spec of a `family` model: a caption-trained one sees the image alone."""
        style = "image" if family == EMBEDDING_FAMILIES["caption"] else "question"
        return cls(family=family, query_style=style, **settings)

    def query_text(self, question: str | None) -> str:
        """The text part of a query: the filled template, or "" for the image alone."""
        if self.query_style == "image" or question is None:
            return ""
        return query_text(question, self.query_template)

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / SPEC_FILE
        content = {**asdict(self), "class_templates": list(self.class_templates)}
        path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, folder: str | Path) -> EmbeddingSpec | None:
        """The spec a model folder carries, or None when it carries none."""
        path = Path(folder) / SPEC_FILE
        if not path.is_file():
            return None
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return cls(**{**raw, "class_templates": tuple(raw.get("class_templates", ("{class}",)))})
        except (json.JSONDecodeError, TypeError) as err:
            raise ConfigError(f"{path}: not a valid embedding spec: {err}") from None


def query_text(question: str, template: str = QUERY_TEMPLATE) -> str:
    """The instruction of a VQA-style query: `template` with `question` in its slot."""
    return template.replace(QUESTION_SLOT, question.strip())


def last_token_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The state at each row's last non-padding position: hidden [B, T, D], mask [B, T] -> [B, D].

    Works for left and right padding alike (the last position whose mask is 1)."""
    last = last_token_index(attention_mask.to(hidden.device))  # [B]
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def embed_batch(vlm: nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
    """Unit-norm float32 embeddings [B, D] of one collated batch (model inputs + attention_mask)."""
    hidden = get_backbone(vlm)(**model_inputs(inputs), use_cache=False).last_hidden_state
    return F.normalize(last_token_pool(hidden, inputs["attention_mask"]).float(), dim=-1)


class EmbeddingModel(nn.Module):
    """A module whose forward embeds batches with the wrapped VLM: wrap this (not the VLM) in
    DDP / Accelerate, so the distributed wrapper's forward sees every pass.

    `forward(*batches)` returns one [B_i, D] tensor per batch (a tuple when given several), so
    queries and targets can run in one wrapped call.
    """

    def __init__(self, vlm: nn.Module):
        super().__init__()
        self.vlm = vlm

    def forward(self, *batches: dict[str, Any]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        out = tuple(embed_batch(self.vlm, batch) for batch in batches)
        return out[0] if len(out) == 1 else out


def _open_image(ref: Any, **where: Any) -> Image.Image:
    """A PIL image as it is; a path or encoded bytes through `load_image`."""
    return ref if isinstance(ref, Image.Image) else load_image(ref, **where)


def embedding_collator(processor: Any) -> VLMCollator:
    """The collator of embedding inputs: prompt only (generation prompt appended), right-padded;
    an Example's image may be a PIL image, a path or encoded bytes."""
    return VLMCollator(processor, {}, train=False, padding_side="right", image_loader=_open_image)


def query_example(key: str, image: Any, text: str, source: str = "") -> Example:
    """An Example holding one query (or, with image None, one target text)."""
    return Example(id=key, image=image, instruction=text, target="", env="", source=source)


class Embedder:
    """Callable pieces of inference: unit-norm float32 numpy embeddings of queries and texts.

    Args:
        model, processor: a VLM in eval mode and its processor.
        spec: how queries are formed (`EmbeddingSpec`).
        batch_size: inputs per forward pass.
    """

    def __init__(self, model: nn.Module, processor: Any, spec: EmbeddingSpec, *, batch_size: int = 16):
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.model: Any  # a transformers model: device (not declared by nn.Module)
        self.model, self.spec, self.batch_size = model.eval(), spec, batch_size
        self.collate = embedding_collator(processor)

    @torch.no_grad()
    def _embed(self, examples: list[Example]) -> np.ndarray:
        chunks = []
        for start in range(0, len(examples), self.batch_size):
            batch = self.collate(examples[start : start + self.batch_size])
            inputs = {k: v.to(self.model.device) if torch.is_tensor(v) else v for k, v in batch.items()}
            chunks.append(embed_batch(self.model, inputs).cpu().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 0), dtype=np.float32)

    def queries(self, images: Sequence[Image.Image], questions: Sequence[str | None] | None = None) -> np.ndarray:
        """Embeddings [n, D] of images, each with its question (None: the image alone)."""
        questions = list(questions) if questions is not None else [None] * len(images)
        if len(questions) != len(images):
            raise ConfigError(f"{len(images)} images but {len(questions)} questions")
        return self._embed([query_example(str(i), img, self.spec.query_text(q))
                            for i, (img, q) in enumerate(zip(images, questions))])

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings [n, D] of texts (targets: answers, captions, class names)."""
        return self._embed([query_example(str(i), None, t) for i, t in enumerate(texts)])
