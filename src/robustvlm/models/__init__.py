"""robustvlm.models: load models (hub, local, tiny offline) as backends of a family; model
operations (generation, option log-likelihood, image and text embeddings); trainable parts;
answer-only logits.

The names below are imported on first use (PEP 562 `__getattr__`), so importing a light
submodule (`robustvlm.models.zoo_recipes` for `zoo list`) does not import torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robustvlm.models.answer import (
        AnswerModel,
        answer_outputs,
        get_backbone,
        get_lm_head,
        model_inputs,
    )
    from robustvlm.models.backends import BACKENDS, Backend, load_backend
    from robustvlm.models.loading import load_vlm
    from robustvlm.models.outputs import AnswerOutputs
    from robustvlm.models.tiny import build_tiny_vlm
    from robustvlm.models.trainable import configure_trainable, count_parameters, find_parts

#: public name -> the submodule that defines it
_HOMES = {
    "AnswerModel": "answer", "answer_outputs": "answer", "get_backbone": "answer", "get_lm_head": "answer",
    "model_inputs": "answer", "BACKENDS": "backends", "Backend": "backends", "load_backend": "backends",
    "load_vlm": "loading", "AnswerOutputs": "outputs", "build_tiny_vlm": "tiny",
    "configure_trainable": "trainable", "count_parameters": "trainable", "find_parts": "trainable",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'robustvlm.models' has no attribute {name!r}")
    return getattr(importlib.import_module(f"robustvlm.models.{_HOMES[name]}"), name)


__all__ = [
    "BACKENDS",
    "AnswerModel",
    "Backend",
    "AnswerOutputs",
    "answer_outputs",
    "build_tiny_vlm",
    "configure_trainable",
    "count_parameters",
    "find_parts",
    "get_backbone",
    "get_lm_head",
    "load_backend",
    "load_vlm",
    "model_inputs",
]
