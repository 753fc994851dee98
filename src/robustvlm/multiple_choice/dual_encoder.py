"""Zero-shot multiple choice with a dual encoder (HF CLIP or SigLIP) and a template ensemble.

A class's text embedding: each template filled with the class name ("A photo of a dog.",
"dog"), embedded, L2-normalised, averaged over the templates and normalised again. The image
embedding is L2-normalised. An option's score is the cosine similarity of the two; the
prediction is the best-scoring option. (CLIP's logit scale and SigLIP's bias change no argmax
and are left out.) Class embeddings are cached per scorer: a benchmark reuses few classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image

from robustvlm.data.images import load_image
from robustvlm.errors import ConfigError
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.prompts import DUAL_ENCODER_TEMPLATES, fill_template, is_template


def _features(output: Any) -> torch.Tensor:
    """The projected embeddings from `get_*_features` (a tensor, or an output's pooler_output)."""
    return output if torch.is_tensor(output) else output.pooler_output


def is_siglip(model: torch.nn.Module) -> bool:
    """SigLIP text towers pool the last position, so their texts are padded to full length."""
    return str(getattr(model.config, "model_type", "")).startswith("siglip")


@torch.no_grad()
def text_embeddings(model: torch.nn.Module, processor: Any, texts: Sequence[str]) -> torch.Tensor:
    """L2-normalised text embeddings [n, d]."""
    tokenizer = getattr(processor, "tokenizer", processor)
    if is_siglip(model):
        padding = {"padding": "max_length", "max_length": model.config.text_config.max_position_embeddings}
    else:
        padding = {"padding": True}
    encoded = tokenizer(list(texts), truncation=True, return_tensors="pt", **padding)
    inputs = {k: v.to(model.device) for k, v in encoded.items() if k in ("input_ids", "attention_mask")}
    if is_siglip(model):
        inputs.pop("attention_mask", None)  # SigLIP was trained without a text attention mask
    return F.normalize(_features(model.get_text_features(**inputs)).float(), dim=-1)


@torch.no_grad()
def image_embeddings(model: torch.nn.Module, processor: Any, images: Sequence[Image.Image]) -> torch.Tensor:
    """L2-normalised image embeddings [n, d]."""
    pixels = processor(images=list(images), return_tensors="pt")["pixel_values"].to(model.device)
    return F.normalize(_features(model.get_image_features(pixel_values=pixels)).float(), dim=-1)


def ensemble_embedding(
    model: torch.nn.Module, processor: Any, class_name: str, templates: Sequence[str]
) -> torch.Tensor:
    """The class's template-ensemble embedding [d]: mean of the normalised template embeddings,
    renormalised."""
    texts = [fill_template(t, class_name) for t in templates]
    return F.normalize(text_embeddings(model, processor, texts).mean(dim=0), dim=-1)


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
        self._classes: dict[str, torch.Tensor] = {}

    def class_embedding(self, class_name: str) -> torch.Tensor:
        if class_name not in self._classes:
            self._classes[class_name] = ensemble_embedding(self.model, self.processor, class_name, self.templates)
        return self._classes[class_name]

    def score(self, questions: Sequence[MCQuestion]) -> list[list[float]]:
        """Per question, the K cosine similarities between its image and its options."""
        images = [load_image(q.image, source=q.source, record=q.id) for q in questions]
        image_emb = image_embeddings(self.model, self.processor, images)  # [B, d]
        return [
            (torch.stack([self.class_embedding(o) for o in q.options]) @ image_emb[i]).tolist()
            for i, q in enumerate(questions)
        ]
