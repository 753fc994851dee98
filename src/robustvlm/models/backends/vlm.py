"""The `vlm` family: generative image-text-to-text models (Idefics3, LLaVA, Qwen2-VL, ...)."""

from __future__ import annotations

from robustvlm.models.backends.base import Backend
from robustvlm.models.loading import load_vlm


class VLMBackend(Backend):
    """A generative image-text-to-text model (`models.loading.load_vlm`)."""

    @classmethod
    def load(cls, name: str, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        model, processor = load_vlm(name, corpus=corpus, trust_remote_code=trust_remote_code)
        return cls(name, family, model, processor)
