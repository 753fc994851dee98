"""Batched greedy generation from a VLM."""

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
    repetition_penalty: float = 1.15,
) -> list[str]:
    """Greedy-decode answers for a left-padded generation batch (from VLMCollator(train=False)).

    Returns one stripped string per example, the prompt removed.
    """
    inputs = {
        k: v.to(model.device)
        for k, v in batch.items()
        if isinstance(v, torch.Tensor) and k != "env"
    }
    tokenizer = getattr(processor, "tokenizer", processor)
    out = model.generate(
        **inputs,
        do_sample=False,
        max_new_tokens=max_new_tokens,
        repetition_penalty=repetition_penalty,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=_stop_ids(model, tokenizer),
    )
    new_tokens = out[:, inputs["input_ids"].shape[1] :]
    return [t.strip() for t in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]


def _stop_ids(model: torch.nn.Module, tokenizer: Any) -> list[int]:
    """Token ids that end an answer: the model's eos ids plus the tokenizer's eos / end-of-turn."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    for tok in (tokenizer.eos_token, "<end_of_utterance>", "<|im_end|>"):
        tid = tokenizer.convert_tokens_to_ids(tok) if tok else None
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid not in ids:
            ids.append(tid)
    return ids
