"""The image embedder of `visual` distractors: a model named as in `mc eval` (a CLIP or SigLIP
dual encoder, or a VLM; hub name, folder or "tiny:...") loaded by `models.backends`, and its
`embed_images` operation (`models.vision`: pooled, L2-normalised `get_image_features`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
from PIL import Image

from robustvlm.models.backends import load_backend


def load_image_embedder(name_or_path: str, *, batch_size: int = 32) -> Callable[[list[Image.Image]], np.ndarray]:
    """RGB images -> unit-norm embeddings [n, d] of the named model (ConfigError when it
    cannot embed images)."""
    backend = load_backend(name_or_path)
    backend.require("image_embed")
    return partial(backend.embed_images, batch_size=batch_size)
