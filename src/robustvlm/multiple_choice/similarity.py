"""Zero-shot multiple choice by similarity: dual encoders (CLIP, SigLIP) and embedding models.

A class's text embedding: each template filled with the class name ("A photo of a dog.",
"dog"), embedded by the backend (`Backend.embed_texts`, unit norm), averaged over the templates
and normalised again. The query embedding is the backend's embedding of the image asked the
question (`Backend.embed_queries`): a dual encoder's normalised projected image embedding (it
reads no question), an embedding model's image-plus-instruction embedding (or its image alone,
when it was trained on captions). An option's score is the cosine similarity of the two; the
prediction is the best-scoring option. (CLIP's logit scale and SigLIP's bias change no argmax
and are left out.) Class embeddings are cached per scorer: a benchmark reuses few classes.

The question shown to an embedding model is the question the benchmark was built with; a
benchmark built with a dual-encoder template gets the first generative question instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from robustvlm.data.images import load_image
from robustvlm.errors import ConfigError
from robustvlm.models.backends import Backend
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.prompts import (
    DUAL_ENCODER_TEMPLATES,
    GENERATIVE_PROMPTS,
    fill_template,
    is_template,
)


def ensemble_embedding(
    embed_texts: Callable[[Sequence[str]], np.ndarray], class_name: str, templates: Sequence[str]
) -> np.ndarray:
    """The class's template-ensemble embedding [d]: mean of the unit-norm template embeddings
    `embed_texts` returns, renormalised."""
    mean = embed_texts([fill_template(t, class_name) for t in templates]).mean(axis=0)
    return mean / np.linalg.norm(mean)


def question_text(question: MCQuestion) -> str:
    """The plain question an image is asked (no options): the benchmark's prompt, or the first
    generative question when the benchmark holds a dual-encoder template."""
    return GENERATIVE_PROMPTS[0] if is_template(question.prompt) else question.prompt


class SimilarityScorer:
    """Scores questions by query-option cosine similarity (see the module docstring).

    Args:
        backend: a model whose family embeds images and texts.
        templates: texts holding `{class}`; None: the backend's own (`class_templates`), else
            the dual-encoder default templates.
    """

    def __init__(self, backend: Backend, templates: Sequence[str] | None = None):
        backend.require("image_embed", "text_embed")
        templates = tuple(templates or backend.class_templates or DUAL_ENCODER_TEMPLATES)
        bad = [t for t in templates if not is_template(t)]
        if bad:
            raise ConfigError(f"similarity templates must hold '{{class}}', got {list(templates)}")
        self.backend, self.templates = backend, templates
        self._classes: dict[str, np.ndarray] = {}

    def class_embedding(self, class_name: str) -> np.ndarray:
        if class_name not in self._classes:
            self._classes[class_name] = ensemble_embedding(self.backend.embed_texts, class_name, self.templates)
        return self._classes[class_name]

    def score(self, questions: Sequence[MCQuestion]) -> list[list[float]]:
        """Per question, the K cosine similarities between its query and its options."""
        images = [load_image(q.image, source=q.source, record=q.id) for q in questions]
        queries = self.backend.embed_queries(images, [question_text(q) for q in questions])  # [B, d]
        return [
            (np.stack([self.class_embedding(o) for o in q.options]) @ queries[i]).astype(float).tolist()
            for i, q in enumerate(questions)
        ]
