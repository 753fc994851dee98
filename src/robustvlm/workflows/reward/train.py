"""`robustvlm rm train`: train a reward model (see `reward.task`)."""

from __future__ import annotations

from pathlib import Path

from robustvlm.config import RewardConfig
from robustvlm.models.support import require_capability
from robustvlm.reward.task import RewardTask
from robustvlm.workflows.finetune.train import TrainResult, train_task


def train_reward_model(
    cfg: RewardConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True
) -> TrainResult:
    """Train `cfg.model` with `cfg.loss` into `out_dir` (`final/` in the reward format)."""
    require_capability(cfg.model.ref, "rm")
    return train_task(RewardTask(cfg), cfg, out_dir, resume=resume, progress=progress)
