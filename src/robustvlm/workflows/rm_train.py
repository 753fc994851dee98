"""`robustvlm rm train`: train a reward model (see `reward.task`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robustvlm.config import RewardConfig
from robustvlm.reward.task import RewardTask
from robustvlm.training.loop import run_training


@dataclass
class RewardTrainResult:
    """Where a finished run left its outputs, and the environments it trained on."""

    out_dir: Path
    final_dir: Path
    steps: int
    env_names: list[str]


def train_reward_model(
    cfg: RewardConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True
) -> RewardTrainResult:
    """Train `cfg.model` with `cfg.loss` into `out_dir` (`final/` in the reward format)."""
    task = RewardTask(cfg)
    done = run_training(task, cfg.train, out_dir, settings=cfg, resume=resume, progress=progress)
    return RewardTrainResult(done.out_dir, done.final_dir, done.steps, task.env_names)
