"""Zero-shot multiple choice with a dual encoder (HF CLIP or SigLIP) and a template ensemble.

A class's text embedding: each template filled with the class name ("A photo of a dog.",
"dog"), embedded (`models.text_encoder.tower_text_embeddings`), L2-normalised, averaged over the
templates and normalised again. The image embedding is the L2-normalised projected image
embedding (`models.vision`). An option's score is the cosine similarity of the two; the
prediction is the best-scoring option. (CLIP's logit scale and SigLIP's bias change no argmax
and are left out.) Class embeddings are cached per scorer: a benchmark reuses few classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from robustvlm.data.images import load_image
from robustvlm.errors import ConfigError
from robustvlm.models.text_encoder import tower_text_embeddings
from robustvlm.models.vision import VisionTowerEmbedder
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.prompts import DUAL_ENCODER_TEMPLATES, fill_template, is_template


def ensemble_embedding(
    model: torch.nn.Module, processor: Any, class_name: str, templates: Sequence[str]
) -> torch.Tensor:
    """The class's template-ensemble embedding [d]: mean of the normalised template embeddings,
    renormalised."""
    texts = [fill_template(t, class_name) for t in templates]
    return F.normalize(tower_text_embeddings(model, processor, texts).mean(dim=0), dim=-1)


class DualEncoderScorer:
    """Scores questions by image-option cosine similarity (see the module docstring).

    Args:
        model, processor: a CLIP- or SigLIP-style model (`get_text_features`,
            `get_image_features`) and its processor.
        templates: text templates holding `{class}`.
    """

    def __init__(self, model: torch.nn.Module, processor: Any, templates: Sequence[str] = DUAL_ENCODER_TEMPLATES):
        bad = [t for t in templates if not is_template(t)]
        if not templates or bad:
            raise ConfigError(f"dual-encoder templates must be non-empty and hold '{{class}}', got {list(templates)}")
        self.model, self.processor, self.templates = model, processor, tuple(templates)
        self.embed_images = VisionTowerEmbedder(model, processor)
        self._classes: dict[str, torch.Tensor] = {}

    def class_embedding(self, class_name: str) -> torch.Tensor:
        if class_name not in self._classes:
            self._classes[class_name] = ensemble_embedding(self.model, self.processor, class_name, self.templates)
        return self._classes[class_name]

    def score(self, questions: Sequence[MCQuestion]) -> list[list[float]]:
        """Per question, the K cosine similarities between its image and its options."""
        images = [load_image(q.image, source=q.source, record=q.id) for q in questions]
        image_emb = torch.from_numpy(self.embed_images(images)).to(self.model.device)  # [B, d]
        return [
            (torch.stack([self.class_embedding(o) for o in q.options]) @ image_emb[i]).tolist()
            for i, q in enumerate(questions)
        ]
