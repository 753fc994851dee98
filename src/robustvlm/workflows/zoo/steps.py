"""One optimisation stage of a zoo member: AdamW over the trainable parameters, linear warm-up
over a tenth of the steps then cosine decay, gradients clipped to norm 1 (the settings of
`training.loop`), on batches a seeded callable draws. One thread, no dropout, seeded draws: a
stage run twice from the same weights gives bit-equal weights.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import get_cosine_schedule_with_warmup

WARMUP_RATIO = 0.1
CLIP_NORM = 1.0


@dataclass(frozen=True)
class StageResult:
    """What a stage did: steps, mean loss over its last tenth, CPU seconds (process time)."""

    steps: int
    final_loss: float
    cpu_seconds: float


def run_stage(
    model: torch.nn.Module,
    loss_of: Callable[[np.random.Generator], torch.Tensor],
    *,
    steps: int,
    lr: float,
    seed: int,
    label: str,
    groups: list[dict] | None = None,
    schedule_steps: int | None = None,
) -> StageResult:
    """Train `model`'s parameters that require gradients for `steps` steps; `loss_of(rng)` draws
    a batch from `rng` (seeded by `seed`) and returns its scalar loss. `groups`: AdamW parameter
    groups (those trainable parameters, each group at its own "lr" or at `lr`) instead of one.
    `schedule_steps`: the steps the warm-up and decay are planned over (default `steps`; more:
    the stage stops before its schedule ends, each step at the rate the whole schedule gives it)."""
    start = time.process_time()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(groups or params, lr=lr, weight_decay=0.01)
    planned = schedule_steps or steps
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(WARMUP_RATIO * planned), planned)
    rng = np.random.default_rng(seed)
    model.train()
    losses = []
    for _ in tqdm(range(steps), desc=label, leave=False, mininterval=5):
        loss = loss_of(rng)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP_NORM)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    model.eval()
    tail = losses[-max(1, steps // 10):]
    return StageResult(steps, round(float(np.mean(tail)), 4), round(time.process_time() - start, 1))
