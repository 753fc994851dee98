"""A toy task for the training loop's tests: least squares, nothing VLM-specific."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from robustvlm.config import TrainConfig
from robustvlm.training.sampler import ShuffleBatchSampler
from robustvlm.training.task import TaskSetup, TrainingTask


class RegressionTask(TrainingTask):
    """Least squares on a fixed random problem; each micro-batch runs two backward passes
    (half a batch each, as a gradient cache would) and counts its calls as task state. Its row:
    the micro-batch's mean squared error `loss`, `hit` (the share of examples within 1 of their
    target: a rate, like a reward model's accuracy) and `calls`."""

    label = "regression"

    def __init__(self):
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(40, 3, generator=generator)
        self.y = self.x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(40, generator=generator)
        self.calls = 0

    def setup(self, ctx):
        self.model = torch.nn.Linear(3, 1)
        acc = ctx.accelerator
        sampler = ShuffleBatchSampler(
            len(self.x), batch_size=ctx.global_batch_size, seed=0,
            rank=acc.process_index, world_size=acc.num_processes,
        )
        return TaskSetup(
            models={"linear": self.model},
            sampler=sampler,
            collate=lambda idx: {"x": self.x[idx], "y": self.y[idx]},
            summary="regression",
        )

    def training_step(self, batch, ctx):
        self.calls += 1
        model, half = ctx.models["linear"], len(batch["y"]) // 2
        total, hits = 0.0, 0
        for part in (slice(0, half), slice(half, None)):
            err = model(batch["x"][part])[:, 0] - batch["y"][part]
            loss = (err**2).sum() / len(batch["y"])
            ctx.backward(loss)
            total += float(loss.detach())
            hits += int((err.detach().abs() < 1).sum())
        return {"loss": total, "hit": hits / len(batch["y"]), "calls": float(self.calls)}

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = state["calls"]

    def save_final(self, final_dir: Path, state_dicts):
        final_dir.mkdir(parents=True)
        save_file({k: v.contiguous() for k, v in state_dicts["linear"].items()}, str(final_dir / "linear.safetensors"))


TRAIN = TrainConfig(steps=10, lr=0.05, batch_size=8, save_every=4, keep_checkpoints=3, cpu_threads=1)
SETTINGS = {"task": "regression", "train": TRAIN.model_dump(mode="json")}




class TwoBranchTask(RegressionTask):
    """Two least-squares models trained side by side, the second's loss scaled by `scale`;
    with `per_branch`, each model's gradients are clipped on its own (as a reward model's main
    branch and its text-only proxy are)."""

    label = "two-branch"

    def __init__(self, scale: float, per_branch: bool):
        super().__init__()
        self.scale, self.per_branch = scale, per_branch

    def setup(self, ctx):
        setup = super().setup(ctx)
        torch.manual_seed(1)
        self.other = torch.nn.Linear(3, 1)
        setup.models = {"linear": self.model, "other": self.other}
        if self.per_branch:
            setup.clip_groups = lambda models: [list(m.parameters()) for m in models.values()]
        return setup

    def training_step(self, batch, ctx):
        row = super().training_step(batch, ctx)
        err = ctx.models["other"](batch["x"])[:, 0] - batch["y"]
        ctx.backward(self.scale * (err**2).mean())
        return row
