"""The image embedder of `visual` distractors: a model named as in `mc eval` (see
`evaluate.load_model`) and its vision tower (`models.vision.VisionTowerEmbedder`: pooled,
L2-normalised `get_image_features`)."""

from __future__ import annotations

from robustvlm.models.vision import VisionTowerEmbedder
from robustvlm.multiple_choice.evaluate import infer_family, load_model


def load_image_embedder(name_or_path: str, *, batch_size: int = 32) -> VisionTowerEmbedder:
    """The embedder of a dual encoder or VLM named as in `mc eval` (hub name, folder or "tiny:...")."""
    model, processor = load_model(name_or_path, infer_family(name_or_path))
    return VisionTowerEmbedder(model, processor, batch_size=batch_size)
