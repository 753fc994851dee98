"""A training run's config (`robustvlm train CONFIG`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from robustvlm.config.data import DataConfig
from robustvlm.config.evaluation import EvalConfig
from robustvlm.config.model import _Run
from robustvlm.config.train import TrainConfig


class RunConfig(_Run):
    """A training run: model, data, method (+ its hyperparameters), training and evaluation."""

    data: DataConfig
    method: str = "erm"
    method_args: dict[str, Any] = Field(default_factory=dict)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
