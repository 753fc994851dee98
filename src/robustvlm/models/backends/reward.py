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
    def load(cls, name: str, family: str, *, corpus: list[str] | None, trust_remote_code: bool) -> Backend:
        if BUILT_OFFLINE in ModelRef.parse(name).capabilities:
            vlm, processor = load_vlm(name, corpus=corpus)
            return cls(name, family, RewardModel(vlm), processor)
        model, processor = load_reward_model(name, trust_remote_code=trust_remote_code)
        backend = cls(name, family, model, processor)
        backend.meta = json.loads((Path(name) / META_FILE).read_text(encoding="utf-8"))
        return backend
