"""Log-likelihood of K continuations of one chat prompt, with or without images.

The prompt (chat messages; an image entry `{"type": "image"}` per image in `images`, in order)
is rendered with the processor's chat template up to the start of the assistant turn and
encoded by the processor, as generation and training encode prompts. Each continuation is
tokenised on its own (no special tokens, no end-of-turn token) and appended to the prompt
tokens. Its score is the sum of its tokens' log-probabilities given everything before them
(nats), the mean over its tokens (length-normalised) and its token count.

Two ways to compute it, with the same numbers up to float rounding:

- shared prefix (the default): the prompt runs once (batch 1); its last position scores the
  first token of every continuation, then its key/value cache serves K rows (`share_cache`: a
  stride-0 view, not K copies) and the K continuations run as one right-padded batch on top of
  it. `run_shared_prefix` is that prefix step on its own, for any model that scores K
  candidates after one prompt.
- full sequences (`shared_prefix=False`): K sequences prompt + continuation as one right-padded
  batch, images repeated K times (`data.prompt_inputs.repeat_batch_of_one`), no cache; the harness way, kept as the independent check
  (several times slower, see BENCHMARKS.md).

Both take the log-softmax only at the rows that score a token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image
from transformers.cache_utils import Cache, DynamicLayer, DynamicSlidingWindowLayer
from transformers.modeling_outputs import BaseModelOutputWithPast

from robustvlm.data.prompt_inputs import (
    PER_TOKEN_INPUTS,
    appended_token_values,
    processor_tensors,
    repeat_batch_of_one,
)
from robustvlm.errors import DataError


@dataclass
class OptionScores:
    """Log-likelihoods of K continuations (nats).

    Attributes:
        sum: [K] summed log-probability of each continuation's tokens.
        mean: [K] the same divided by the continuation's token count.
        n_tokens: [K] tokens per continuation.
    """

    sum: list[float]
    mean: list[float]
    n_tokens: list[int]

    def prediction(self, normalize: bool) -> int:
        """Index of the best continuation by `mean` (normalize=True) or `sum`."""
        values = self.mean if normalize else self.sum
        return max(range(len(values)), key=values.__getitem__)


def encode_prompt(
    processor: Any, messages: list[dict], images: Sequence[Image.Image] = ()
) -> dict[str, torch.Tensor]:
    """The processor's batch-of-one encoding of `messages` up to the assistant turn: tensors
    with a leading axis of 1 (`input_ids` [1, T], pixel inputs when there are images)."""
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return processor_tensors(processor(text=[prompt], images=[list(images)] if images else None, return_tensors="pt"))


def continuation_ids(processor: Any, continuations: Sequence[str]) -> list[list[int]]:
    """Token ids of each continuation, tokenised on its own without special tokens."""
    tokenizer = getattr(processor, "tokenizer", processor)
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in continuations]


# cache layers holding nothing but `keys` / `values`, which their update only concatenates to
_PLAIN_LAYERS = (DynamicLayer, DynamicSlidingWindowLayer)


def share_cache(cache: Cache, k: int) -> None:
    """Make a batch-1 cache serve a batch of `k`, in place. Plain dynamic layers get a stride-0
    view of their keys/values (no copy: the next update concatenates into fresh [k, ...]
    tensors); any other cache is repeated k times (`batch_repeat_interleave`)."""
    if not all(type(layer) in _PLAIN_LAYERS for layer in getattr(cache, "layers", [None])):
        cache.batch_repeat_interleave(k)
        return
    for layer in cache.layers:
        assert isinstance(layer, _PLAIN_LAYERS)  # every layer's type was checked above
        if layer.is_initialized:
            assert layer.keys is not None and layer.values is not None  # set when initialised
            layer.keys = layer.keys.expand(k, *layer.keys.shape[1:])
            layer.values = layer.values.expand(k, *layer.values.shape[1:])


#: The name under which this transformers passes a key/value cache to `forward` and returns it:
#: `cache` from 5.2x on (`past_key_values` is deprecated there), `past_key_values` before.
CACHE_ARG = "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"


def cache_of(output: Any) -> Any:
    """The key/value cache a forward pass returned (`CACHE_ARG`)."""
    return getattr(output, CACHE_ARG)


def run_shared_prefix(model: torch.nn.Module, prefix: dict[str, torch.Tensor], k: int, **forward_kwargs: Any) -> Any:
    """Run a batch-of-one prefix once with the cache on; returns the model output, whose cache
    (`cache_of`) now serves `k` rows (`share_cache`) for K continuations run on top of it.
    `forward_kwargs` go to the forward call (e.g. `logits_to_keep=1`)."""
    out = model(**prefix, use_cache=True, **forward_kwargs)
    share_cache(cache_of(out), k)
    return out


def pad_right(rows: list[list[int]], value: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """[K, L] ids right-padded with `value`, and the [K, L] bool mask of real tokens."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), value, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = True
    return ids, mask


def _token_logprobs(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[K, L] log-probabilities of `targets` under `logits` [K, L, V] (float32), 0 where `mask`
    is False; the log-softmax runs over the real rows only, not the padding."""
    out = torch.zeros(targets.shape, dtype=torch.float32, device=logits.device)
    rows = torch.log_softmax(logits[mask].float(), dim=-1)  # [n_real, V]
    out[mask] = rows.gather(-1, targets[mask][:, None])[:, 0]
    return out


def shared_prefix_logprobs(
    model: torch.nn.Module, prefix: dict[str, torch.Tensor], ids: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """[K, L] token log-probs with the prefix run once: its last position scores token 0 of
    every row; the rows minus their last token ([K, L - 1]; the last token predicts nothing
    scored) run on the shared cache and score tokens 1..L-1. No attention mask is needed
    there: the prefix has no padding, and a row's padding only follows its real tokens, which
    the causal mask keeps from seeing it."""
    out = run_shared_prefix(model, prefix, len(ids), logits_to_keep=1)
    logprobs = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
    logprobs[:, 0] = torch.log_softmax(out.logits[0, -1].float(), dim=-1)[ids[:, 0]]
    if ids.shape[1] > 1:
        logits = model(input_ids=ids[:, :-1], use_cache=True, **{CACHE_ARG: cache_of(out)}).logits
        logprobs[:, 1:] = _token_logprobs(logits, ids[:, 1:], mask[:, 1:])
    return logprobs


def full_sequence_inputs(
    prefix: dict[str, torch.Tensor], ids: torch.Tensor, mask: torch.Tensor,
    appended: Mapping[str, int] | None = None,
) -> dict[str, torch.Tensor]:
    """Model inputs of K sequences prefix + row: the batch-1 prefix inputs repeated K times
    (`repeat_batch_of_one`) and the [K, L] right-padded rows `ids` appended; the attention mask
    covers the prefix and each row's real tokens (`mask`); per-token inputs are extended with
    `appended` (`data.prompt_inputs.appended_token_values`; 0 where missing)."""
    k = len(ids)
    inputs = repeat_batch_of_one(prefix, k)
    n_prefix = inputs["input_ids"].shape[1]
    inputs["input_ids"] = torch.cat([inputs["input_ids"], ids], dim=1)
    ones = torch.ones((k, n_prefix), dtype=torch.long, device=ids.device)
    inputs["attention_mask"] = torch.cat([ones, mask.long()], dim=1)
    for name in PER_TOKEN_INPUTS:
        if name in inputs:
            value = (appended or {}).get(name, 0)
            inputs[name] = torch.cat([inputs[name], torch.full_like(ids, value)], dim=1)
    return inputs


def full_sequence_logprobs(
    model: torch.nn.Module, prefix: dict[str, torch.Tensor], ids: torch.Tensor, mask: torch.Tensor,
    appended: Mapping[str, int],
) -> torch.Tensor:
    """[K, L] token log-probs from K full sequences prefix + row (prefix inputs repeated K
    times, no cache); logits only at the last L + 1 positions (those that predict row tokens,
    and the final one)."""
    inputs = full_sequence_inputs(prefix, ids, mask, appended)
    logits = model(**inputs, use_cache=False, logits_to_keep=ids.shape[1] + 1).logits
    # kept row t predicts continuation token t (the last kept row predicts nothing scored)
    return _token_logprobs(logits[:, :-1], ids, mask)


@torch.no_grad()
def option_logliks(
    model: torch.nn.Module,
    processor: Any,
    messages: list[dict],
    continuations: Sequence[str],
    *,
    images: Sequence[Image.Image] = (),
    shared_prefix: bool = True,
    record: str = "the prompt",
) -> OptionScores:
    """Log-likelihood of each continuation as the assistant's reply to `messages` (see the
    module docstring).

    Args:
        model, processor: a causal (vision-)language model in eval mode and its processor.
        messages: chat messages, one `{"type": "image"}` content entry per image.
        continuations: the K scored texts.
        images: the prompt's RGB images, in order (none for a text-only prompt).
        shared_prefix: run the prompt once and share its cache (default), or run K full
            sequences (the independent check).
        record: names the prompt in errors (e.g. "question 'q1'").

    Raises DataError when a continuation tokenises to nothing.
    """
    rows = continuation_ids(processor, continuations)
    if any(len(r) == 0 for r in rows):
        raise DataError(f"a continuation of {record} tokenises to nothing: {list(continuations)}")
    device: Any = model.device  # a transformers model's device (nn.Module declares none)
    prefix = {k: v.to(device) for k, v in encode_prompt(processor, messages, images).items()}
    ids, mask = (t.to(device) for t in pad_right(rows))
    if shared_prefix:
        logprobs = shared_prefix_logprobs(model, prefix, ids, mask)
    else:
        logprobs = full_sequence_logprobs(model, prefix, ids, mask, appended_token_values(processor))
    totals = (logprobs * mask).sum(dim=1)
    counts = mask.sum(dim=1)
    return OptionScores(sum=totals.tolist(), mean=(totals / counts).tolist(), n_tokens=counts.tolist())
