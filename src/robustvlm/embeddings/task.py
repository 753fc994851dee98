"""Contrastive embedding training (VLM2Vec) as a task of the shared training loop.

Each micro-batch holds B query/target pairs (`pairs`). Both sides are embedded by the same
VLM (`models.embedding.EmbeddingModel`: last-layer state of the last real token,
L2-normalised), gathered across processes with the local rows keeping their gradient
(`distributed`), and scored by InfoNCE over the in-batch negatives (`loss`). With
`embed.chunk_size` the batch goes through the gradient cache (`gradcache`): the same loss and
gradients with one chunk's activations alive at a time.

Besides the loop's outputs (train_log.jsonl rows: `loss`, `grad_norm`, `lr`, `seconds`;
checkpoints; exact resume), the run folder holds data/ (a built-in benchmark), base/ (a tiny
model's initial weights), skipped.jsonl, and final/: the model with its LoRA merged, its
processor and `embedding.json` (`models.embedding.EmbeddingSpec`: family, query style,
templates), so `mc eval` and `embed eval` score it by similarity.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from robustvlm.config import EmbedRunConfig
from robustvlm.data.from_config import materialize
from robustvlm.embeddings.distributed import gather_with_local_grad, loss_scale
from robustvlm.embeddings.gradcache import cached_backward
from robustvlm.embeddings.loss import info_nce
from robustvlm.embeddings.pairs import ContrastivePairCollator, target_groups, trained_family
from robustvlm.models.answer import freeze_unused_lm_head
from robustvlm.models.embedding import EmbeddingModel, EmbeddingSpec
from robustvlm.models.trainable import (
    configure_trainable,
    count_parameters,
    enable_gradient_checkpointing,
    save_merged,
)
from robustvlm.training.setup import base_model, load_training_set, make_sampler
from robustvlm.training.task import SetupContext, StepContext, TaskSetup, TrainingTask, indexed

EMBEDDER = "embedder"


def _to(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}


class EmbeddingTask(TrainingTask):
    """Train `cfg.model` into an embedding model on the pairs of `cfg.data` (see the module doc)."""

    command = "embed train"
    label = "infonce"

    def __init__(self, cfg: EmbedRunConfig):
        self.cfg = cfg
        self.family = ""

    def prepare_files(self, out_dir: Path) -> None:
        materialize(self.cfg.data, out_dir)

    def setup(self, ctx: SetupContext) -> TaskSetup:
        cfg = self.cfg
        train_set = load_training_set(cfg.data, ctx)
        self.family = trained_family(train_set, cfg.embed.caption_envs)
        corpus = [t for ex in train_set for t in (cfg.embed.query_template, ex.instruction, ex.target)]
        model, self.processor = base_model(cfg.model, ctx.out_dir, corpus, ctx.accelerator)
        self.model = configure_trainable(model, mode=cfg.model.trainable, lora=cfg.model.lora.model_dump())
        freeze_unused_lm_head(self.model)
        if cfg.model.gradient_checkpointing:
            enable_gradient_checkpointing(self.model)
        n_trainable, n_total = count_parameters(self.model)
        envs = sorted({ex.env for ex in train_set})
        sampler = make_sampler(
            cfg.train.sampler, [envs.index(ex.env) for ex in train_set],
            global_batch=ctx.global_batch_size, seed=cfg.train.seed, accelerator=ctx.accelerator,
        )
        collator = ContrastivePairCollator(self.processor, cfg.embed.query_template, cfg.embed.caption_envs,
                                           target_groups(train_set))
        n_caption = sum(collator.query_of(ex).instruction == "" for ex in train_set)
        summary = (f"embedding training of {cfg.model.name} ({self.family}): {n_trainable:,} of {n_total:,} "
                   f"parameters trainable, {len(train_set)} pairs ({n_caption} caption, "
                   f"{len(train_set) - n_caption} VQA)")
        return TaskSetup({EMBEDDER: EmbeddingModel(self.model)}, sampler, indexed(collator, train_set), summary)

    def _loss(self, groups: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """(query embeddings, target embeddings) of this process -> the global InfoNCE loss."""
        embed = self.cfg.embed
        gathered = gather_with_local_grad(groups) if embed.distinct_negatives else None

        def loss(queries: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            return info_nce(gather_with_local_grad(queries), gather_with_local_grad(targets),
                            temperature=embed.temperature, groups=gathered)

        return loss

    def training_step(self, batch: dict[str, Any], ctx: StepContext) -> dict[str, float]:
        device = ctx.accelerator.device
        model = ctx.models[EMBEDDER]
        queries, targets = _to(batch["query"], device), _to(batch["target"], device)
        loss_fn = self._loss(batch["groups"].to(device))
        scale = loss_scale()
        if self.cfg.embed.chunk_size is None:
            loss = loss_fn(*model(queries, targets))
            ctx.backward(loss * scale)
            return {"loss": float(loss.detach())}
        value = cached_backward(
            model, queries, targets, chunk_size=self.cfg.embed.chunk_size, loss_fn=loss_fn,
            backward=lambda surrogate: ctx.backward(surrogate * scale), no_sync=ctx.no_sync,
            image_token_id=getattr(self.processor, "image_token_id", None),
        )
        return {"loss": value}

    def save_final(self, final_dir: Path, state_dicts: dict[str, dict[str, torch.Tensor]]) -> None:
        prefix = "vlm."  # EmbeddingModel keeps the VLM as its `vlm` attribute
        weights = {k[len(prefix):]: v for k, v in state_dicts[EMBEDDER].items()}
        save_merged(self.model, self.processor, final_dir, state_dict=weights)
        embed = self.cfg.embed
        EmbeddingSpec.for_family(
            self.family,
            query_template=embed.query_template,
            class_templates=tuple(embed.class_templates),
        ).save(final_dir)
