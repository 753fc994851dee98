"""The `reward` family: reward models, a VLM with a scalar head (`models.reward`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from robustvlm.model_ref import BUILT_OFFLINE, ModelRef
from robustvlm.models.backends.base import Backend
from robustvlm.models.loading import load_vlm
from robustvlm.models.reward import META_FILE, RewardModel, load_reward_model


class RewardBackend(Backend):
    """A reward model saved by `models.reward.save_reward_model` ("tiny:<kind>" / "real:<name>":
    a tiny or real-size random VLM with a fresh head). `meta` holds its reward_model.json ({} for a tiny one)."""

    meta: dict[str, Any] = {}

    @classmethod
    def load(cls, ref: ModelRef, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        if BUILT_OFFLINE in ref.capabilities:
            vlm, processor = load_vlm(ref, corpus=corpus)
            return cls(ref.name, family, RewardModel(vlm), processor)
        model, processor = load_reward_model(ref.location, trust_remote_code=trust_remote_code)
        backend = cls(ref.name, family, model, processor)
        backend.meta = json.loads((Path(ref.location) / META_FILE).read_text(encoding="utf-8"))
        return backend
