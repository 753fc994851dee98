"""robustvlm.models: load models (hub, local, tiny offline) as backends of a family; model
operations (generation, option log-likelihood, image and text embeddings); trainable parts;
answer-only logits."""

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
