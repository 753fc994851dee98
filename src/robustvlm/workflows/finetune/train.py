"""`robustvlm train`: fine-tune a VLM with one of the invariance objectives; `train_task` runs
any training task (reward models too) the same way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from robustvlm.config import RewardConfig, RunConfig
from robustvlm.data.records import Example
from robustvlm.models.support import require_capability
from robustvlm.objectives import check_method
from robustvlm.training.finetune import FineTuneTask
from robustvlm.training.loop import LoopResult, run_training
from robustvlm.training.task import TrainingTask


@dataclass
class TrainResult(LoopResult):
    """The loop's result, the environments the run trained on and every record of its data (all
    splits, as training loaded them: what its evaluation reads; empty for tasks of other records)."""

    env_names: Sequence[str] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)


def train_task(
    task: TrainingTask, cfg: RunConfig | RewardConfig, out_dir: str | Path, *, resume: bool, progress: bool
) -> TrainResult:
    """Run `task` with `cfg.train` into `out_dir`, `cfg` stored as the run's settings."""
    done = run_training(task, cfg.train, out_dir, settings=cfg, resume=resume, progress=progress)
    return TrainResult(**vars(done), env_names=task.env_names)


def train(
    cfg: RunConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True
) -> TrainResult:
    """Fine-tune `cfg.model` with `cfg.method` into `out_dir` (see `training.finetune`); the
    method and its hyperparameters are checked before the folder is claimed."""
    check_method(cfg.method, cfg.method_args, "method_args")
    require_capability(cfg.model.ref, "train")
    task = FineTuneTask(cfg)
    result = train_task(task, cfg, out_dir, resume=resume, progress=progress)
    result.examples = task.examples
    return result
