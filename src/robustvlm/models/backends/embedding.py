"""The `vlm2vec-*` families: a VLM used as an embedding model (`models.embedding`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from robustvlm.model_ref import ModelRef
from robustvlm.models.backends.base import Backend
from robustvlm.models.embedding import Embedder, EmbeddingSpec
from robustvlm.models.loading import load_vlm


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
    def load(cls, ref: ModelRef, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        spec = EmbeddingSpec.read(ref.location) if Path(ref.location).is_dir() else None
        if spec is None:
            spec = EmbeddingSpec.for_family(family)
        model, processor = load_vlm(ref, corpus=corpus, trust_remote_code=trust_remote_code)
        return cls(ref.name, family, model, processor, spec)

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
