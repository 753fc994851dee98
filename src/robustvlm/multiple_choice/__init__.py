"""Multiple-choice image classification benchmarks with hard distractors (building, not scoring)."""

from robustvlm.multiple_choice.build import (
    MCQuestion,
    build_questions,
    read_questions,
    rotations,
    write_questions,
)
from robustvlm.multiple_choice.distractors import METHODS, choose_distractors
from robustvlm.multiple_choice.prompts import DUAL_ENCODER_TEMPLATES, PROMPTS, format_question

__all__ = [
    "DUAL_ENCODER_TEMPLATES",
    "METHODS",
    "PROMPTS",
    "MCQuestion",
    "build_questions",
    "choose_distractors",
    "format_question",
    "read_questions",
    "rotations",
    "write_questions",
]
