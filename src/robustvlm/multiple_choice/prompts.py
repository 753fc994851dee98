"""The five prompt formulations of the multiple-choice benchmarks, and how options are shown.

Prompts 0-2 are questions for generative VLMs: the question is followed by the lettered options
and an answer instruction (`format_question`). Prompts 3-4 are dual-encoder (CLIP-style) text
templates: a scorer fills `{class}` with each option and compares the texts with the image.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

from robustvlm.errors import ConfigError

GENERATIVE_PROMPTS = (
    "What type of object is in this photo?",
    "Select the most appropriate label for the object shown in the image.",
    "Identify the object in this image.",
)
DUAL_ENCODER_TEMPLATES = ("A photo of a {class}.", "{class}")
PROMPTS = GENERATIVE_PROMPTS + DUAL_ENCODER_TEMPLATES

ANSWER_INSTRUCTION = "Answer with the option's letter."
LETTERS = string.ascii_uppercase
CLASS_SLOT = "{class}"


def option_letter(index: int) -> str:
    """The letter of option `index` (0 -> "A")."""
    if not 0 <= index < len(LETTERS):
        raise ConfigError(f"option index {index} has no letter (at most {len(LETTERS)} options)")
    return LETTERS[index]


def format_question(question_text: str, options: Sequence[str]) -> str:
    """The generative prompt: the question, one "A. option" line per option, the instruction."""
    lines = [question_text]
    lines += [f"{option_letter(i)}. {option}" for i, option in enumerate(options)]
    lines.append(ANSWER_INSTRUCTION)
    return "\n".join(lines)


def is_template(prompt_text: str) -> bool:
    """True for a dual-encoder template (it holds the `{class}` slot)."""
    return CLASS_SLOT in prompt_text


def fill_template(template: str, class_name: str) -> str:
    """A dual-encoder text for one class: "A photo of a {class}." -> "A photo of a dog."."""
    return template.replace(CLASS_SLOT, class_name)


def resolve_prompt(prompt: int | str) -> str:
    """The prompt text: an index into PROMPTS, or a custom question or `{class}` template."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ConfigError("the prompt is empty")
        return prompt
    if not 0 <= prompt < len(PROMPTS):
        raise ConfigError(f"prompt must be 0..{len(PROMPTS) - 1} (see PROMPTS) or a text, got {prompt}")
    return PROMPTS[prompt]


def render_prompt(prompt_text: str, options: Sequence[str]) -> str:
    """The question text stored with a question: templates as they are, questions formatted."""
    return prompt_text if is_template(prompt_text) else format_question(prompt_text, options)
