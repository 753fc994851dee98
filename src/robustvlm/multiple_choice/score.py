"""Score multiple-choice questions with a generative VLM: option log-likelihood or generation.

Log-likelihood. The prompt is the image and `format_question(question, options)` as one user
turn, rendered with the model's chat template up to the start of the assistant turn. Option i is
scored as the continuation "<letter>. <option text>" (e.g. "B. golden retriever"): the letter is
what the prompt asks for and the text makes the score depend on the class name, not on the
letter prior alone. The continuation is tokenised on its own (no special tokens, no end-of-turn
token) and appended to the prompt tokens. Its score is the sum of its tokens' log-probabilities
given everything before them (nats), and the mean over its tokens (length-normalised). A model
fine-tuned to be scored this way must learn to reply with this very continuation: tiny models
trained to reply with the bare class name scored at chance even on their training images.

The image-and-question prefix runs once; its last position scores the first token of every
option, then its key/value cache serves K rows (a view, not K copies) and the K continuations
run as one right-padded batch on top of it (`score_options`). The harness way, K full sequences of
prompt + continuation (`score_options_separately`), gives the same numbers (up to float
rounding) at several times the cost (see BENCHMARKS.md). Both take the log-softmax only at the
rows that score a token.

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
from transformers.cache_utils import Cache, DynamicLayer, DynamicSlidingWindowLayer

from robustvlm.data.collate import VLMCollator
from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import DataError
from robustvlm.models.generate import generate_batch
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


def _token_logprobs(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[K, L] log-probabilities of `targets` under `logits` [K, L, V] (float32), 0 where `mask`
    is False; the log-softmax runs over the real rows only, not the padding."""
    out = torch.zeros(targets.shape, dtype=torch.float32, device=logits.device)
    rows = torch.log_softmax(logits[mask].float(), dim=-1)  # [n_real, V]
    out[mask] = rows.gather(-1, targets[mask][:, None])[:, 0]
    return out


def _check_options(question: MCQuestion, rows: list[list[int]]) -> None:
    if any(len(r) == 0 for r in rows):
        raise DataError(f"an option of question {question.id!r} tokenises to nothing: {question.options}")


# cache layers holding nothing but `keys` / `values`, which their update only concatenates to
_PLAIN_LAYERS = (DynamicLayer, DynamicSlidingWindowLayer)


def _share_cache(cache: Cache, k: int) -> None:
    """Make a batch-1 cache serve a batch of `k`. Plain dynamic layers get a stride-0 view of
    their keys/values (no copy: the next update concatenates into fresh [k, ...] tensors); any
    other cache is repeated K times (`batch_repeat_interleave`)."""
    if not all(type(layer) in _PLAIN_LAYERS for layer in getattr(cache, "layers", [None])):
        cache.batch_repeat_interleave(k)
        return
    for layer in cache.layers:
        if layer.is_initialized:
            layer.keys = layer.keys.expand(k, *layer.keys.shape[1:])
            layer.values = layer.values.expand(k, *layer.values.shape[1:])


@torch.no_grad()
def score_options(model: torch.nn.Module, processor: Any, question: MCQuestion) -> OptionScores:
    """Option log-likelihoods with a shared prefix.

    The image + question run once (batch 1); its last position scores every option's first
    token. Its cache then serves K rows (`_share_cache`) and the continuations minus their last
    token ([K, L - 1], right-padded; the last token predicts nothing that is scored) run on top
    of it, scoring tokens 1..L-1. No attention mask is needed there: the prefix has no padding,
    and a row's padding only follows its real tokens, which the causal mask keeps from seeing it.
    """
    prefix = {k: v.to(model.device) for k, v in encode_prefix(processor, question).items()}
    rows = option_token_ids(processor, question.options)
    _check_options(question, rows)
    ids, mask = (t.to(model.device) for t in _pad_right(rows, value=0))
    out = model(**prefix, use_cache=True, logits_to_keep=1)
    logprobs = torch.zeros(ids.shape, dtype=torch.float32, device=model.device)
    logprobs[:, 0] = torch.log_softmax(out.logits[0, -1].float(), dim=-1)[ids[:, 0]]
    if ids.shape[1] > 1:
        cache = out.past_key_values
        _share_cache(cache, len(rows))
        logits = model(input_ids=ids[:, :-1], past_key_values=cache, use_cache=True).logits
        logprobs[:, 1:] = _token_logprobs(logits, ids[:, 1:], mask[:, 1:])
    return _summarise(logprobs, mask)


@torch.no_grad()
def score_options_separately(model: torch.nn.Module, processor: Any, question: MCQuestion) -> OptionScores:
    """Option log-likelihoods the harness way: K full sequences prompt + continuation, as one
    right-padded batch with the image repeated K times, no cache; logits only at the last
    L + 1 positions (the ones that predict continuation tokens, and the final one)."""
    prefix = {k: v.to(model.device) for k, v in encode_prefix(processor, question).items()}
    rows = option_token_ids(processor, question.options)
    _check_options(question, rows)
    ids, mask = (t.to(model.device) for t in _pad_right(rows, value=0))
    inputs = {name: value.expand(len(rows), *value.shape[1:]) for name, value in prefix.items()}
    inputs["input_ids"] = torch.cat([inputs["input_ids"], ids], dim=1)
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    for name in ("token_type_ids", "mm_token_type_ids"):
        if name in inputs:
            inputs[name] = torch.cat([inputs[name], torch.zeros_like(ids)], dim=1)
    logits = model(**inputs, use_cache=False, logits_to_keep=ids.shape[1] + 1).logits
    # kept row t predicts continuation token t (the last kept row predicts nothing scored)
    return _summarise(_token_logprobs(logits[:, :-1], ids, mask), mask)


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
