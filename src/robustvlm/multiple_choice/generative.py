"""Score multiple-choice questions with a generative VLM: option log-likelihood or generation.

Log-likelihood. The prompt is the image and `format_question(question, options)` as one user
turn; option i is scored as the continuation "<letter>. <option text>" (e.g. "B. golden
retriever"): the letter is what the prompt asks for and the text makes the score depend on the
class name, not on the letter prior alone. The scores (summed and mean log-probability, nats)
come from `models.loglik.option_logliks`: by default the image-and-question prefix runs once
and its cache serves the K continuations; `shared_prefix=False` runs K full sequences, the
harness way, with the same numbers up to float rounding. A model fine-tuned to be scored this
way must learn to reply with this very continuation: tiny models trained to reply with the bare
class name scored at chance even on their training images.

`question_logliks` asks any backend for the same scores (a served model through its server's
prompt log-probabilities).

Generation. Greedy decoding (local or served, `generate_answers`), then `extract_choice` maps the reply to an option index or None
(unparsed: counted and reported by the runner, never scored as a guess).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from robustvlm.data.images import load_image
from robustvlm.models.backends import Backend
from robustvlm.models.chat import ChatPrompt
from robustvlm.models.loglik import OptionScores, continuation_ids, encode_prompt, option_logliks
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.prompts import (
    GENERATIVE_PROMPTS,
    LETTERS,
    format_question,
    is_template,
)


def vlm_prompt_text(question: MCQuestion) -> str:
    """The user text for a generative VLM; a dual-encoder template question gets the first
    generative question instead (a template is not a question)."""
    text = GENERATIVE_PROMPTS[0] if is_template(question.prompt) else question.prompt
    return format_question(text, question.options)


def continuation(index: int, option: str) -> str:
    """The scored text of option `index`: "<letter>. <option>"."""
    return f"{LETTERS[index]}. {option}"


def option_continuations(options: Sequence[str]) -> list[str]:
    """The scored texts of all options, in order."""
    return [continuation(i, o) for i, o in enumerate(options)]


def question_prompt(question: MCQuestion) -> tuple[list[dict], list[Image.Image]]:
    """(chat messages, images) of a question: one user turn, the image then the question text."""
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": vlm_prompt_text(question)}]}]
    return messages, [load_image(question.image, source=question.source, record=question.id)]


def encode_prefix(processor: Any, question: MCQuestion) -> dict[str, torch.Tensor]:
    """The processor's batch-of-one encoding of image + question up to the assistant turn."""
    return encode_prompt(processor, *question_prompt(question))


def option_token_ids(processor: Any, options: Sequence[str]) -> list[list[int]]:
    """Token ids of each option's continuation, tokenised without special tokens."""
    return continuation_ids(processor, option_continuations(options))


def question_logliks(backend: Backend, question: MCQuestion) -> OptionScores:
    """Log-likelihoods of the question's K option continuations from any backend that scores
    options (a local model as `score_options` does, or a served one)."""
    messages, images = question_prompt(question)
    return backend.option_logliks(messages, option_continuations(question.options), images=images,
                                  record=f"question {question.id!r}")


def score_options(
    model: torch.nn.Module, processor: Any, question: MCQuestion, *, shared_prefix: bool = True
) -> OptionScores:
    """Log-likelihoods of the question's K option continuations (see the module docstring);
    `shared_prefix=False` computes them from K full sequences instead."""
    messages, images = question_prompt(question)
    return option_logliks(model, processor, messages, option_continuations(question.options), images=images,
                          shared_prefix=shared_prefix, record=f"question {question.id!r}")


# --- generation + answer extraction ------------------------------------------------------

_ANSWER_PHRASE = re.compile(r"\banswer(?:\s+is)?\s*[:\-]?\s*\(?([A-Z])\b(?![\w'])", re.IGNORECASE)
_LEADING_LETTER = re.compile(r"^\(?([A-Z])(?:\)|[.:]|$)(?=\s|$)")
_BARE_LETTER = re.compile(r"^\(?([A-Za-z])\)?[.:]?$")


def extract_choice(reply: str, options: Sequence[str]) -> int | None:
    """The option a free-text reply picks, or None when it picks none unambiguously.

    Tried in order: (1) a letter among the options' letters: the whole reply ("B", "b", "(B)",
    "B."), the reply's start ("B. dog", "(B) dog", "B) dog") or an answer phrase ("Answer: B",
    "the answer is (B)"); (2) option text, case-insensitive: the reply equals one option, else
    exactly one option occurs in it as whole words (an option inside another option that also
    occurs, e.g. "lion" in "sea lion", does not count).
    """
    text = reply.strip()
    valid = LETTERS[: len(options)]
    for pattern in (_BARE_LETTER, _LEADING_LETTER, _ANSWER_PHRASE):
        match = pattern.search(text)
        if match and match.group(1).upper() in valid:
            return valid.index(match.group(1).upper())
    folded = text.lower().rstrip(".!")
    lowered = [o.lower() for o in options]
    if folded in lowered and lowered.count(folded) == 1:
        return lowered.index(folded)
    found = [i for i, o in enumerate(lowered) if re.search(rf"(?<!\w){re.escape(o)}(?!\w)", folded)]
    found = [i for i in found if not any(j != i and lowered[i] in lowered[j] for j in found)]
    return found[0] if len(found) == 1 else None


GENERATE_MAX_NEW_TOKENS = 16  # a letter or an option, with room for "The answer is (B)."


def generate_answers(
    backend: Backend, questions: Sequence[MCQuestion], *, max_new_tokens: int = GENERATE_MAX_NEW_TOKENS,
    repetition_penalty: float = 1.0,
) -> list[str]:
    """Greedy replies (`repetition_penalty` 1.0: none) to a batch of questions, in order, from a
    local or served model alike."""
    prompts = [ChatPrompt(*question_prompt(q), record=q.id) for q in questions]
    return backend.generate_chats(prompts, max_new_tokens=max_new_tokens, repetition_penalty=repetition_penalty)
