"""The image embedder of `visual` distractors: a model named as in `mc eval` (a CLIP or SigLIP
dual encoder, or a VLM; hub name, folder or "tiny:...") loaded by `models.backends`, and its
vision tower (`models.vision.VisionTowerEmbedder`: pooled, L2-normalised `get_image_features`)."""

from __future__ import annotations

from robustvlm.models.backends import load_backend
from robustvlm.models.vision import VisionTowerEmbedder


def load_image_embedder(name_or_path: str, *, batch_size: int = 32) -> VisionTowerEmbedder:
    """RGB images -> unit-norm embeddings [n, d] of the named model (ConfigError when its family
    cannot embed images)."""
    backend = load_backend(name_or_path)
    backend.require("image_embed")
    return VisionTowerEmbedder(backend.model, backend.processor, batch_size=batch_size)
