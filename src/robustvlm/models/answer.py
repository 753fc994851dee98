"""Answer-only forward pass: LM-head logits at the answer positions, never over the whole sequence.

A VLM batch is mostly image and prompt tokens; the built-in `labels=` loss forms [B, T, V]
logits (V = vocabulary) and throws most of them away. Here the backbone yields the final hidden
states [B, T, d], only the N positions whose next token is labelled are kept, and the LM head
runs on those [N, d] rows.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from robustvlm.errors import ConfigError
from robustvlm.models.outputs import AnswerOutputs
from robustvlm.models.trainable import unwrap_peft

IGNORE_INDEX = -100
# Batch entries written by the collator that are not model inputs.
BATCH_EXTRA_KEYS = ("labels", "env", "ids")


def model_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """The batch without labels, env and ids: what the model's forward takes."""
    return {k: v for k, v in batch.items() if k not in BATCH_EXTRA_KEYS}


def _transformers_model(model: nn.Module) -> nn.Module:
    if isinstance(model, DistributedDataParallel):
        raise ConfigError(
            "answer_outputs bypasses the wrapper's forward, so DistributedDataParallel would not "
            "synchronise gradients: wrap the VLM in AnswerModel and distribute that instead"
        )
    return unwrap_peft(model)


def get_backbone(model: nn.Module) -> nn.Module:
    """The VLM without its LM head (`model.model`; through a PEFT wrapper its LoRA layers stay active).

    Its forward returns `last_hidden_state` [B, T, d], the features fed to the LM head.
    """
    inner = _transformers_model(model)
    backbone = getattr(inner, "model", None)
    if not isinstance(backbone, nn.Module):
        raise ConfigError(f"{type(inner).__name__} has no `.model` backbone")
    return backbone


def get_lm_head(model: nn.Module) -> nn.Module:
    """The LM head (a Linear without bias, weight [V, d])."""
    inner: Any = _transformers_model(model)  # a transformers model: get_output_embeddings
    head = inner.get_output_embeddings()
    if head is None:
        raise ConfigError(f"{type(inner).__name__} has no LM head (get_output_embeddings() is None)")
    return head


def answer_outputs(model: nn.Module, batch: dict[str, Any]) -> AnswerOutputs:
    """Run `model` on a collated batch and return logits at the answer positions only.

    Args:
        model: an image-text-to-text model, possibly wrapped by PEFT.
        batch: a `VLMCollator(train=True)` batch: model inputs, `labels` [B, T] (-100 = not an
            answer token) and optionally `env` [B] (missing: env -1 everywhere).

    Returns:
        AnswerOutputs with N = number of labelled tokens after the first position; the mean of
        `token_ce()` equals the `labels=` loss of the model.
    """
    if "labels" not in batch:
        raise ConfigError("answer_outputs needs a batch with labels (VLMCollator(train=True))")
    hidden = get_backbone(model)(**model_inputs(batch), use_cache=False).last_hidden_state
    next_labels = batch["labels"].to(hidden.device)[:, 1:]  # position t predicts token t + 1
    keep = next_labels != IGNORE_INDEX  # [B, T-1]
    features = hidden[:, :-1][keep]  # [N, d]
    head = get_lm_head(model)
    example = keep.nonzero()[:, 0]
    env = batch.get("env")
    env = env.to(hidden.device)[example] if env is not None else torch.full_like(example, -1)
    return AnswerOutputs(
        logits=head(features).float(),
        targets=next_labels[keep],
        example=example,
        env=env,
        hidden=features,
        classifier=cast(torch.Tensor, head.weight),  # the LM head's weight [V, d]
    )


class AnswerModel(nn.Module):
    """A module whose forward is `answer_outputs`: wrap this (not the VLM) in DDP / Accelerate.

    Distributed wrappers synchronise gradients and apply autocast in their own forward, which
    `answer_outputs(vlm, batch)` would bypass. `AnswerModel(vlm)(batch)` goes through them.
    """

    def __init__(self, vlm: nn.Module):
        super().__init__()
        self.vlm = vlm

    def forward(self, batch: dict[str, Any]) -> AnswerOutputs:
        return answer_outputs(self.vlm, batch)


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B] position of each row's last real token in an [B, T] attention mask (left or right
    padding)."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return (attention_mask.bool() * positions).argmax(dim=1)


def freeze_unused_lm_head(vlm: nn.Module) -> None:
    """Freeze the LM head, which reward and embedding models never run (an unused trainable
    parameter would also stall data-parallel synchronisation), unless it is tied to the input
    embeddings (then it is the embedding matrix, which does run)."""
    inner: Any = unwrap_peft(vlm)  # a transformers model: get_output_embeddings, get_input_embeddings
    head, embeddings = inner.get_output_embeddings(), inner.get_input_embeddings()
    if head is not None and head.weight is not embeddings.weight:
        head.requires_grad_(False)
