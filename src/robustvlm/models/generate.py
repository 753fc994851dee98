"""Batched generation from a VLM: greedy, or sampled (temperature / top-p, K replies per prompt)."""

from __future__ import annotations

from typing import Any

import torch


@torch.no_grad()
def generate_batch(
    model: torch.nn.Module,
    processor: Any,
    batch: dict[str, Any],
    *,
    max_new_tokens: int = 128,
    repetition_penalty: float = 1.0,
    sample: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    num_return_sequences: int = 1,
) -> list[str]:
    """Decode answers for a left-padded generation batch (from VLMCollator(train=False)).

    Greedy by default; with `sample`, draws from the softmax at `temperature` restricted to the
    top-p nucleus, `num_return_sequences` replies per prompt (seed torch's RNG first for
    reproducible draws).

    Returns the stripped replies, the prompt removed: one per example, or with
    `num_return_sequences` = K, K consecutive ones per example.
    """
    hf: Any = model  # a transformers model: device, generate (not declared by nn.Module)
    inputs = {
        k: v.to(hf.device)
        for k, v in batch.items()
        if isinstance(v, torch.Tensor) and k != "env"
    }
    tokenizer = getattr(processor, "tokenizer", processor)
    out = hf.generate(
        **inputs,
        max_new_tokens=max_new_tokens,
        repetition_penalty=repetition_penalty,
        **({"do_sample": True, "temperature": temperature, "top_p": top_p,
            "num_return_sequences": num_return_sequences} if sample else {"do_sample": False}),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=_stop_ids(model, tokenizer),
    )
    new_tokens = out[:, inputs["input_ids"].shape[1] :]
    return [t.strip() for t in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]


def _stop_ids(model: torch.nn.Module, tokenizer: Any) -> list[int]:
    """Token ids that end an answer: the model's eos ids plus the tokenizer's eos / end-of-turn."""
    hf: Any = model  # a transformers model: generation_config (not declared by nn.Module)
    eos = hf.generation_config.eos_token_id  # an int, a list of ints or None
    ids: list[int] = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    for tok in (tokenizer.eos_token, "<end_of_utterance>", "<|im_end|>"):
        tid = tokenizer.convert_tokens_to_ids(tok) if tok else None
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid not in ids:
            ids.append(tid)
    return ids
