"""robustvlm.models: load VLMs (hub, local, tiny offline), choose trainable parts, answer-only logits."""

from robustvlm.models.answer import (
    AnswerModel,
    answer_outputs,
    get_backbone,
    get_lm_head,
    model_inputs,
)
from robustvlm.models.loading import load_vlm
from robustvlm.models.outputs import AnswerOutputs
from robustvlm.models.tiny import build_tiny_vlm
from robustvlm.models.trainable import configure_trainable, count_parameters, find_parts

__all__ = [
    "AnswerModel",
    "AnswerOutputs",
    "answer_outputs",
    "build_tiny_vlm",
    "configure_trainable",
    "count_parameters",
    "find_parts",
    "get_backbone",
    "get_lm_head",
    "load_vlm",
    "model_inputs",
]
