"""Load a VLM and its processor by hub name, local folder, `tiny:<kind>`, `zoo:NAME` or
`real:<name>`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from transformers import AutoModelForImageTextToText, AutoProcessor, PreTrainedModel, ProcessorMixin
from transformers.utils import is_torchvision_available

from robustvlm.errors import ConfigError
from robustvlm.model_ref import REAL, TINY, ModelRef
from robustvlm.models.hub import HUB_NETWORK_ERRORS, hub_error_line
from robustvlm.models.image_only import load_image_only_processor
from robustvlm.models.real import build_real_vlm
from robustvlm.models.tiny import build_tiny_vlm
from robustvlm.models.tiny_families import VLM_FAMILIES
from robustvlm.models.zoo_recipes import resolve_model_ref
from robustvlm.runs import atomic_folder

#: What transformers raises for a model it cannot load: missing or unreadable files, bad configs,
#: weights files that are not safetensors (SafetensorError, e.g. "header too large") and a hub
#: that cannot be reached (HUB_NETWORK_ERRORS: a proxy's 5xx, TLS, a timeout).
LOAD_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError, KeyError, SafetensorError, *HUB_NETWORK_ERRORS)


def load_vlm(
    ref: ModelRef,
    *,
    dtype: torch.dtype | None = None,
    trust_remote_code: bool = False,
    tiny_options: dict | None = None,
    corpus: list[str] | None = None,
) -> tuple[PreTrainedModel, ProcessorMixin]:
    """Load an image-text-to-text model and its processor.

    Args:
        ref: a hub name (e.g. "HuggingFaceTB/SmolVLM-256M-Instruct"), a folder written by
            `save_pretrained`, "tiny:<kind>" (built offline, random weights; `tiny_families.VLM_FAMILIES`),
            "zoo:NAME" (a built member of the model zoo, `models.zoo_recipes`) or "real:<name>" (a
            released architecture at its real size, random weights; `real.REAL_MODELS`).
        dtype: parameter dtype (None: the library default for hub models, float32 for tiny/real).
        trust_remote_code: passed to transformers only when True.
        tiny_options: keyword arguments of `build_tiny_vlm` (tiny models) or of `build_real_vlm`
            (real-size models: seed, image_splitting, device).
        corpus: tokenizer training text for tiny and real-size models (ignored otherwise: hub
            tokenizers are fixed).

    Returns:
        (model, processor). Raises ConfigError when the model cannot be loaded.
    """
    ref = resolve_model_ref(ref)
    if ref.kind == TINY:
        kind = ref.location
        if kind not in VLM_FAMILIES:
            raise ConfigError(f"unknown tiny model '{ref.name}'; known: "
                              f"{[ModelRef.tiny(k).name for k in sorted(VLM_FAMILIES)]}")
        model, processor = build_tiny_vlm(kind, corpus=corpus, **(tiny_options or {}))
        # transformers wraps PreTrainedModel.to with functools.wraps, which mypy reads as taking self first
        return (model.to(dtype) if dtype is not None else model), processor  # type: ignore[arg-type]
    if ref.kind == REAL:
        model, processor = build_real_vlm(ref, corpus=corpus, **(tiny_options or {}))
        return (model.to(dtype) if dtype is not None else model), processor  # type: ignore[arg-type]
    if tiny_options:
        raise ConfigError(f"tiny_options apply to 'tiny:' and 'real:' models only, not '{ref.name}'")
    kwargs: dict[str, Any] = {"trust_remote_code": True} if trust_remote_code else {}
    try:
        processor = _load_processor(ref.location, **kwargs)
        if dtype is not None:
            kwargs["dtype"] = dtype
        model = AutoModelForImageTextToText.from_pretrained(ref.location, **kwargs)
    except LOAD_ERRORS as exc:
        raise ConfigError(f"cannot load image-text-to-text model '{ref.name}': "
                          f"{hub_error_line(ref.name, exc)}") from exc
    return model, processor


def _load_processor(location: str, **kwargs: Any) -> ProcessorMixin:
    """AutoProcessor's processor of `location` (a hub id or folder: a resolved `ModelRef.location`); without torchvision, a video-capable model's processor loads
    without its video processor (`image_only`): AutoProcessor then fails with an OSError (no
    video config), an ImportError (the video processor class needs torchvision) or a ValueError
    (no video processor class for the model without torchvision)."""
    try:
        return AutoProcessor.from_pretrained(location, **kwargs)
    except (OSError, ImportError, ValueError):
        if is_torchvision_available():
            raise
        processor = load_image_only_processor(location, **kwargs)
        if processor is None:
            raise
        return processor


def save_tiny_base(ref: ModelRef, folder: Path, *, tiny_options: dict | None = None, corpus: list[str]) -> Path:
    """Build the tiny model `ref` ("tiny:<kind>") into `folder` unless it is already there, under
    a temporary name renamed when complete (a killed build never leaves a half-written folder);
    returns `folder`."""
    if not folder.is_dir():
        model, processor = load_vlm(ref, tiny_options=tiny_options, corpus=corpus)
        with atomic_folder(folder) as tmp:
            model.save_pretrained(tmp)
            processor.save_pretrained(tmp)
    return folder
