"""Optimisation settings of a training run."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from robustvlm.config.base import _Section
from robustvlm.extras import require


class TrainConfig(_Section):
    """Optimisation settings (defaults follow the Dynamic BIRM paper where it states them).

    `report_to` names experiment trackers Accelerate logs to besides train_log.jsonl
    (e.g. [tensorboard], [wandb], [mlflow]; each needs its package installed); off by default.
    A step whose loss or gradient norm is not finite stops the run with an error naming the step
    (`final/` is not written); `skip_nonfinite_steps` skips such steps' updates instead and counts
    them (`skipped_steps` in train_log.jsonl).
    """

    steps: int | None = Field(default=None, ge=1)
    epochs: float = Field(default=1.0, gt=0)
    lr: float = Field(default=3e-5, ge=0)
    weight_decay: float = Field(default=0.0, ge=0)
    batch_size: int = Field(default=4, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    warmup_ratio: float = Field(default=0.1, ge=0, le=1)
    clip_norm: float = Field(default=1.0, gt=0)
    seed: int = Field(default=0, ge=0)
    bf16: Literal["auto", True, False] = "auto"
    sampler: Literal["balanced", "shuffle"] = "balanced"
    save_every: int = Field(default=100, ge=1)
    keep_checkpoints: int = Field(default=2, ge=1)
    log_every: int = Field(default=1, ge=1)
    cpu_threads: int | None = Field(default=None, ge=1)
    report_to: list[str] = Field(default_factory=list)
    skip_nonfinite_steps: bool = False

    @field_validator("report_to")
    @classmethod
    def _tracker_installed(cls, report_to: list[str]) -> list[str]:
        if "tensorboard" in report_to:
            require("tensorboard", "train.report_to: [tensorboard]")
        return report_to
