"""Score multiple-choice questions with a generative VLM: option log-likelihood or generation.

Log-likelihood. The prompt is the image and `format_question(question, options)` as one user
turn, rendered with the model's chat template up to the start of the assistant turn. Option i is
scored as the continuation "<letter>. <option text>" (e.g. "B. golden retriever"): the letter is
what the prompt asks for and the text makes the score depend on the class name, not on the
letter prior alone. The continuation is tokenised on its own (no special tokens, no end-of-turn
token) and appended to the prompt tokens. Its score is the sum of its tokens' log-probabilities
given everything before them (nats), and the mean over its tokens (length-normalised).

The image-and-question prefix runs once; its key/value cache is repeated K times and the K
continuations run as one right-padded batch on top of it (`score_options`). The harness way,
K full sequences of prompt + continuation (`score_options_separately`), gives the same numbers
(up to float rounding) at about K times the cost.

Generation. Greedy decoding, then `extract_choice` maps the reply to an option index or None
(unparsed: counted and reported by the runner, never scored as a guess).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image

from robustvlm.data.collate import VLMCollator
from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import DataError
from robustvlm.evaluation.generate import generate_batch
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.prompts import (
    GENERATIVE_PROMPTS,
    LETTERS,
    format_question,
    is_template,
)


@dataclass
class OptionScores:
    """Log-likelihoods of a question's K options (nats).

    Attributes:
        sum: [K] summed log-probability of each continuation's tokens.
        mean: [K] the same divided by the continuation's token count.
        n_tokens: [K] tokens per continuation.
    """

    sum: list[float]
    mean: list[float]
    n_tokens: list[int]

    def prediction(self, normalize: bool) -> int:
        """Index of the best option by `mean` (normalize=True) or `sum`."""
        values = self.mean if normalize else self.sum
        return max(range(len(values)), key=values.__getitem__)


def vlm_prompt_text(question: MCQuestion) -> str:
    """The user text for a generative VLM; a dual-encoder template question gets the first
    generative question instead (a template is not a question)."""
    text = GENERATIVE_PROMPTS[0] if is_template(question.prompt) else question.prompt
    return format_question(text, question.options)


def continuation(index: int, option: str) -> str:
    """The scored text of option `index`: "<letter>. <option>"."""
    return f"{LETTERS[index]}. {option}"


def encode_prefix(processor: Any, question: MCQuestion) -> dict[str, torch.Tensor]:
    """The processor's batch-of-one encoding of image + question up to the assistant turn."""
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": vlm_prompt_text(question)}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    image: Image.Image = load_image(question.image, source=question.source, record=question.id)
    encoded = processor(text=[prompt], images=[[image]], return_tensors="pt")
    return {k: v for k, v in encoded.items() if torch.is_tensor(v)}


def option_token_ids(processor: Any, options: Sequence[str]) -> list[list[int]]:
    """Token ids of each option's continuation, tokenised without special tokens."""
    tokenizer = getattr(processor, "tokenizer", processor)
    return [tokenizer(continuation(i, o), add_special_tokens=False)["input_ids"] for i, o in enumerate(options)]


def _pad_right(rows: list[list[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[K, L] ids right-padded with `value`, and the [K, L] bool mask of real tokens."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), value, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = True
    return ids, mask


def _summarise(token_logprobs: torch.Tensor, mask: torch.Tensor) -> OptionScores:
    """Per-option sum and mean of [K, L] token log-probs over the real tokens."""
    totals = (token_logprobs * mask).sum(dim=1)
    counts = mask.sum(dim=1)
    return OptionScores(
        sum=totals.tolist(), mean=(totals / counts).tolist(), n_tokens=counts.tolist()
    )


def _check_options(question: MCQuestion, rows: list[list[int]]) -> None:
    if any(len(r) == 0 for r in rows):
        raise DataError(f"an option of question {question.id!r} tokenises to nothing: {question.options}")


@torch.no_grad()
def score_options(model: torch.nn.Module, processor: Any, question: MCQuestion) -> OptionScores:
    """Option log-likelihoods with a shared prefix: the image + question run once (batch 1),
    the cache is repeated K times and the K continuations [K, L] run on top of it."""
    prefix = {k: v.to(model.device) for k, v in encode_prefix(processor, question).items()}
    rows = option_token_ids(processor, question.options)
    _check_options(question, rows)
    ids, mask = _pad_right(rows, value=0)
    ids, mask = ids.to(model.device), mask.to(model.device)
    k, n_prefix = len(rows), prefix["input_ids"].shape[1]
    out = model(**prefix, use_cache=True, logits_to_keep=1)
    first = torch.log_softmax(out.logits[:, -1].float(), dim=-1).expand(k, -1)  # [K, V]: token 0
    cache = out.past_key_values
    cache.batch_repeat_interleave(k)
    attention = torch.ones((k, n_prefix + ids.shape[1]), dtype=torch.long, device=model.device)
    rest = model(input_ids=ids, attention_mask=attention, past_key_values=cache, use_cache=True).logits
    logprobs = torch.cat([first[:, None], torch.log_softmax(rest[:, :-1].float(), dim=-1)], dim=1)
    return _summarise(logprobs.gather(-1, ids[..., None])[..., 0], mask)


@torch.no_grad()
def score_options_separately(model: torch.nn.Module, processor: Any, question: MCQuestion) -> OptionScores:
    """Option log-likelihoods the harness way: K full sequences prompt + continuation, as one
    right-padded batch with the image repeated K times, no cache."""
    prefix = encode_prefix(processor, question)
    rows = option_token_ids(processor, question.options)
    _check_options(question, rows)
    k, n_prefix = len(rows), prefix["input_ids"].shape[1]
    ids, mask = _pad_right(rows, value=0)
    full_ids = torch.cat([prefix["input_ids"].expand(k, -1), ids], dim=1)
    inputs = {name: value.expand(k, *value.shape[1:]) for name, value in prefix.items()}
    inputs["input_ids"] = full_ids
    inputs["attention_mask"] = torch.ones_like(full_ids)
    for name in ("token_type_ids", "mm_token_type_ids"):
        if name in inputs:
            inputs[name] = torch.cat([inputs[name], torch.zeros_like(ids)], dim=1)
    logits = model(**{n: v.to(model.device) for n, v in inputs.items()}, use_cache=False).logits
    predicting = logits[:, n_prefix - 1 : -1].float()  # position t predicts token t + 1
    token_logprobs = torch.log_softmax(predicting, dim=-1).gather(-1, ids.to(model.device)[..., None])[..., 0]
    return _summarise(token_logprobs, mask.to(model.device))


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


def generate_answers(
    model: torch.nn.Module,
    processor: Any,
    questions: Sequence[MCQuestion],
    *,
    max_new_tokens: int = 16,
) -> list[str]:
    """Greedy replies (no repetition penalty) to a batch of questions, in order."""
    examples = [
        Example(id=q.id, image=q.image, instruction=vlm_prompt_text(q), target="", env=q.source, source=q.source)
        for q in questions
    ]
    batch = VLMCollator(processor, {}, train=False)(examples)
    return generate_batch(model, processor, batch, max_new_tokens=max_new_tokens, repetition_penalty=1.0)
