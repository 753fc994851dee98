"""Fine-tune a VLM to answer a two-option question with one of the objectives, as `train` does,
on batches collated once (the invariance ladder's VLM rungs, `experiments.ladder.run`).

A training step is `FineTuneTask.training_step`'s: the objective on `AnswerModel(vlm)(batch)`
(the LM-head logits at the answer tokens: the answer word and the end-of-turn token), then
the loop's optimiser as `training.loop` sets it up (AdamW, linear warm-up over a tenth of the
steps then cosine decay, gradients clipped to norm 1). Each step draws `batch_size / 2` rows
from each of the two training environments (the `balanced` sampler). The model's answer to a
row is the candidate (of the two answer words) with the larger logit at the answer position,
so accuracy never depends on generation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from transformers import get_cosine_schedule_with_warmup

from robustvlm.models.answer import AnswerModel
from robustvlm.models.outputs import restrict_to_candidates
from robustvlm.objectives import Objective

CLIP_NORM = 1.0  # `train.clip_norm`'s default
WARMUP_RATIO = 0.1  # `train.warmup_ratio`'s default


@dataclass
class AnswerRows:
    """A collated batch of every row of one environment (`VLMCollator(train=True)` output without
    `ids`: tensors whose first dimension is the row), and the two answer words' token ids."""

    batch: dict[str, torch.Tensor]
    candidates: torch.Tensor  # [2] token ids of the two answers, in label order

    def __len__(self) -> int:
        return len(self.batch["input_ids"])

    def take(self, rows: np.ndarray | slice) -> dict[str, torch.Tensor]:
        """The batch of these rows."""
        index = rows if isinstance(rows, slice) else torch.from_numpy(np.asarray(rows))
        return {k: v[index] for k, v in self.batch.items()}


def candidate_correct(model: AnswerModel, rows: AnswerRows, batch_size: int = 256) -> np.ndarray:
    """[n] bool: whether each row's labelled answer has the larger logit of the two candidates
    at its first answer token; evaluated in eval mode without gradients."""
    was_training = model.training
    model.eval()
    correct = []
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            out = model(rows.take(slice(start, start + batch_size)))
            first = torch.ones_like(out.example, dtype=torch.bool)
            first[1:] = out.example[1:] != out.example[:-1]  # each row's first answer token
            scores = out.logits[first][:, rows.candidates]  # [rows, 2]
            truth = (out.targets[first] == rows.candidates[1]).long()
            correct.append((scores.argmax(1) == truth).numpy())
    model.train(was_training)
    return np.concatenate(correct)


def fit_answer(
    objective: Objective,
    vlm: nn.Module,
    train: list[AnswerRows],
    *,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    candidates_only: bool = False,
    eval_every: int = 0,
    on_eval: Callable[[int, AnswerModel], None] | None = None,
) -> AnswerModel:
    """Train `vlm` (its trainable parameters as `models.trainable.configure_trainable` set them)
    on the rows of the training environments `train` (env id i = `train[i]`, as
    `objective.env_names[i]`); returns the trained `AnswerModel`.

    Args:
        steps, lr, batch_size: optimiser steps, AdamW peak learning rate, rows per step (half from
            each environment).
        seed: seed of the batch draws.
        candidates_only: hand the objective the two answers' logits at the answer-word positions
            only (`models.outputs.restrict_to_candidates`: risk and penalty of the binary choice)
            instead of the vocabulary-wide logits at every answer token.
        eval_every, on_eval: `on_eval(steps done, model)` after every `eval_every` steps and after
            the last one.
    """
    model = AnswerModel(vlm).train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(WARMUP_RATIO * steps), steps)
    rng = np.random.default_rng(seed)
    per_env = batch_size // len(train)
    for step in range(steps):
        if objective.resets_optimizer_at(step):
            optimizer.state.clear()
        parts = [rows.take(rng.choice(len(rows), per_env, replace=False)) for rows in train]
        batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
        out = model(batch)
        objective(restrict_to_candidates(out, train[0].candidates) if candidates_only else out, step).loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP_NORM)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        done = step + 1
        if on_eval is not None and ((eval_every and done % eval_every == 0) or done == steps):
            on_eval(done, model)
    return model


def env_rows(collate: Callable[[list], Mapping], examples: list, candidates: torch.Tensor) -> AnswerRows:
    """`AnswerRows` of `examples` collated in one batch by `collate` (a `VLMCollator`)."""
    batch = dict(collate(examples))
    batch.pop("ids", None)
    return AnswerRows(batch, candidates)
