"""`robustvlm train`: fine-tune a VLM with one of the invariance objectives."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robustvlm.config import RunConfig
from robustvlm.training.finetune import FineTuneTask
from robustvlm.training.loop import run_training


@dataclass
class TrainResult:
    """Where a finished run left its outputs, and the environments it trained on."""

    out_dir: Path
    final_dir: Path
    steps: int
    env_names: list[str]


def train(
    cfg: RunConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True
) -> TrainResult:
    """Fine-tune `cfg.model` with `cfg.method` into `out_dir` (see `training.finetune`)."""
    task = FineTuneTask(cfg)
    done = run_training(task, cfg.train, out_dir, settings=cfg, resume=resume, progress=progress)
    return TrainResult(done.out_dir, done.final_dir, done.steps, task.env_names)
