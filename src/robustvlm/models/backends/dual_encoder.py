"""The `clip` and `siglip` families: dual encoders (image and text towers)."""

from __future__ import annotations

from transformers import AutoModel, AutoProcessor

from robustvlm.errors import ConfigError
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.models.backends.base import Backend
from robustvlm.models.loading import LOAD_ERRORS
from robustvlm.models.tiny_clip import build_tiny_dual_encoder


class DualEncoderBackend(Backend):
    """A CLIP- or SigLIP-style dual encoder (`AutoModel`; "tiny:clip" / "tiny:siglip" offline)."""

    @classmethod
    def load(cls, ref: ModelRef, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        if ref.kind == TINY:
            model, processor = build_tiny_dual_encoder(ref.location, corpus=corpus or ())
            return cls(ref.name, family, model, processor)
        kwargs = {"trust_remote_code": True} if trust_remote_code else {}
        try:
            model = AutoModel.from_pretrained(ref.location, **kwargs)
            processor = AutoProcessor.from_pretrained(ref.location, **kwargs)
        except LOAD_ERRORS as exc:
            raise ConfigError(f"cannot load dual encoder '{ref.name}': {exc}") from exc
        return cls(ref.name, family, model, processor)
