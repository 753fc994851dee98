"""Image embeddings from a model's vision tower, one vector per image.

An image's embedding is what the model's `get_image_features` returns, pooled: a dual
encoder's (CLIP, SigLIP) projected image embedding as it is; a VLM's image tokens as the
language model receives them (vision tower + connector / projector: Idefics3, LLaVA,
Qwen2-VL, ...) averaged over the tokens of all the image's crops (every crop gives the same
number of tokens, so this is also the mean of the per-crop means; all-zero padding crops are
left out by the model). With `normalize` (the default) the vector is L2-normalised; raw
vectors serve linear probes.

Images are preprocessed one at a time and batched only with images of the same preprocessed
shape, so no image is padded for another's sake: an embedding does not depend on its batch.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from robustvlm.errors import ConfigError

POOLINGS = ("mean", "flatten")


def pool_image_features(features: Any, how: str = "mean") -> torch.Tensor:
    """Per-image vectors from `get_image_features` output (or its `pooler_output`): a tensor
    [n, d] (pooled already), a tensor [n, tokens, d] or a list of n tensors [..., d].

    how: "mean" averages the tokens ([n, d]); "flatten" lays them end to end
    ([n, tokens x d], every image must give as many tokens), keeping where each token is.
    """
    if how not in POOLINGS:
        raise ConfigError(f"pooling must be one of {POOLINGS}, got {how!r}")
    if not torch.is_tensor(features) and hasattr(features, "pooler_output"):
        features = features.pooler_output
    if isinstance(features, list | tuple):
        rows = [f.reshape(-1, f.shape[-1]) for f in features]
        return torch.stack([r.mean(dim=0) if how == "mean" else r.reshape(-1) for r in rows])
    if torch.is_tensor(features) and features.ndim in (2, 3):
        if features.ndim == 2:
            return features
        return features.mean(dim=1) if how == "mean" else features.reshape(len(features), -1)
    raise ConfigError(f"cannot pool image features of type {type(features).__name__}; expected "
                      "a tensor [n, d] or [n, tokens, d] or a list of per-image tensors")


class VisionTowerEmbedder:
    """Callable: list of RGB PIL images -> embeddings, float32 [n, d] (see the module docstring).

    Args:
        model: a model with `get_image_features` (CLIP, SigLIP, Idefics3, LLaVA, ...), eval mode.
        processor: its processor (its `image_processor` is used) or an image processor.
        batch_size: images per forward pass.
        normalize: L2-normalise each embedding (False: the raw pooled features).
        pooling: "mean" over the image tokens, or "flatten" them (`pool_image_features`).
    """

    def __init__(self, model: torch.nn.Module, processor: Any, *, batch_size: int = 32, normalize: bool = True,
                 pooling: str = "mean"):
        if not hasattr(model, "get_image_features"):
            raise ConfigError(f"{type(model).__name__} has no get_image_features: not a vision model")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        # a transformers model (device, dtype, get_image_features): attributes nn.Module does not declare
        self.model: Any = model.eval()
        self.image_processor = getattr(processor, "image_processor", processor)
        self.batch_size = batch_size
        self.normalize = normalize
        self.pooling = pooling

    def _preprocess(self, image: Image.Image) -> dict[str, torch.Tensor]:
        """One image's model inputs, each with a leading batch axis of 1."""
        encoded = self.image_processor(images=[image], return_tensors="pt")
        return {k: v for k, v in encoded.items() if torch.is_tensor(v)}

    def _to_model(self, value: torch.Tensor) -> torch.Tensor:
        if value.is_floating_point():
            return value.to(self.model.device, dtype=self.model.dtype)
        return value.to(self.model.device)

    @torch.no_grad()
    def _embed(self, inputs: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        """Embeddings [len(inputs), d] (float32, CPU) of same-shaped preprocessed images."""
        batch = {k: self._to_model(torch.cat([x[k] for x in inputs])) for k in inputs[0]}
        pooled = pool_image_features(self.model.get_image_features(**batch), self.pooling).float()
        return (F.normalize(pooled, dim=-1) if self.normalize else pooled).cpu()

    def __call__(self, images: list[Image.Image]) -> np.ndarray:
        inputs = [self._preprocess(img) for img in images]
        same_shape: dict[tuple, list[int]] = defaultdict(list)
        for i, x in enumerate(inputs):
            same_shape[tuple((k, tuple(v.shape)) for k, v in sorted(x.items()))].append(i)
        vectors: dict[int, torch.Tensor] = {}
        for indices in same_shape.values():
            for start in range(0, len(indices), self.batch_size):
                chunk = indices[start : start + self.batch_size]
                vectors.update(zip(chunk, self._embed([inputs[i] for i in chunk])))
        return torch.stack([vectors[i] for i in range(len(images))]).numpy()
