"""Model inputs from a processor's encoding of prompts, the same way for every architecture.

Processors differ in what they return beside `input_ids` / `attention_mask`:

- PaliGemma's returns `labels` built from its token types (a training convenience robustvlm
  does not use; a model given them computes a loss over the prompt): dropped.
- per-token inputs (`token_type_ids`, `mm_token_type_ids`) must be extended when tokens are
  appended after the prompt (a reply in training, continuations in scoring). Appended tokens are
  text: 0, except in PaliGemma's prefix-LM, whose `token_type_ids` 1 marks the causal suffix
  (0 would let the reply attend to itself bidirectionally, seeing the tokens it must predict).
- pixel inputs are batch-leading ([B, ...]) for most families, but flattened over images or
  patches for others (Qwen-VL: `pixel_values` [patches, D], `image_grid_thw` [images, 3]);
  `repeat_batch_of_one` handles both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from transformers import PaliGemmaProcessor

PER_TOKEN_INPUTS = ("token_type_ids", "mm_token_type_ids")


def processor_tensors(encoded: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors of a processor's output that a forward pass takes (not `labels`)."""
    return {k: v for k, v in encoded.items() if torch.is_tensor(v) and k != "labels"}


def appended_token_values(processor: Any) -> dict[str, int]:
    """Value of each per-token input for tokens appended after a prompt (missing: 0)."""
    return {"token_type_ids": 1} if isinstance(processor, PaliGemmaProcessor) else {}


def repeat_batch_of_one(inputs: Mapping[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
    """Inputs of one prompt repeated for a batch of `k`: batch-leading tensors ([1, ...]) as a
    stride-0 view, tensors with one row per image or patch (all of the one prompt) stacked k
    times."""
    return {
        name: value.expand(k, *value.shape[1:]) if value.shape[0] == 1
        else value.repeat(k, *([1] * (value.dim() - 1)))
        for name, value in inputs.items()
    }
