"""The `vlm` family: generative image-text-to-text models (Idefics3, LLaVA, Qwen2-VL, ...)."""

from __future__ import annotations

from robustvlm.model_ref import ModelRef
from robustvlm.models.backends.base import Backend
from robustvlm.models.loading import load_vlm


class VLMBackend(Backend):
    """A generative image-text-to-text model (`models.loading.load_vlm`)."""

    @classmethod
    def load(cls, ref: ModelRef, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        model, processor = load_vlm(ref, corpus=corpus, trust_remote_code=trust_remote_code)
        return cls(ref.name, family, model, processor)
