"""A reward-model run's config (`robustvlm rm train CONFIG`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from robustvlm.config.base import _Section
from robustvlm.config.data import PreferenceDataConfig
from robustvlm.config.model import _Run
from robustvlm.config.train import TrainConfig


class RewardTrainConfig(TrainConfig):
    """`TrainConfig` with the shortcut-aware paper's optimiser defaults (lr 1e-5, weight decay
    0.05, cosine with 10% warm-up) and plain shuffled batches (one environment is the norm)."""

    lr: float = Field(default=1e-5, ge=0)
    weight_decay: float = Field(default=0.05, ge=0)
    sampler: Literal["balanced", "shuffle"] = "shuffle"


class RewardEvalConfig(_Section):
    """How reward models are scored on preference pairs.

    `shared_prefix`: run image + query once and let its key/value cache serve both responses;
    `text_only_test`: also score every pair without the image (the paper's text-only test), the
    image removed as `text_mode` says (drop: no image tokens; blank: a white image);
    `n_boot`: bootstrap resamples of the accuracy intervals;
    `swap_check`: also score every pair with chosen and rejected swapped and stop at the first
    pair whose scores are not its scores reversed (a pairing bug; doubles the scoring cost).
    """

    split: str = "test"
    shared_prefix: bool = True
    text_only_test: bool = True
    swap_check: bool = True
    text_mode: Literal["drop", "blank"] = "drop"
    n_boot: int = Field(default=1000, ge=100)
    max_per_env: int | None = Field(default=None, ge=1)


class RewardConfig(_Run):
    """A reward-model training run: model, preference data, loss (+ its arguments), training,
    evaluation. `loss` names a loss of `robustvlm.reward.losses.LOSSES`.

    `init_from`: a reward-model folder (another run's `final/`, `save_reward_model`'s format) to
    start from, a warm start: its backbone replaces the one `model.name` names (`model.name`
    still says which architecture it is) and its head replaces the new head; with a proxy, the
    proxy starts as its copy too. None: `model.name` with a new head.

    `reward`: what the reward reads (`models.reward.REWARDS`): `head`, a new linear head on the
    last token's hidden state (the paper's architecture); `loglik` / `loglik_sum`, the VLM's own
    length-normalised / summed log-likelihood of the response, no new parameters, so that a
    pretrained VLM's reward ranks by the picture from step 0. Every branch (the main one, the
    text-only model, the proxy) uses it.
    """

    data: PreferenceDataConfig
    loss: str = "standard"
    loss_args: dict[str, Any] = Field(default_factory=dict)
    reward: Literal["head", "loglik", "loglik_sum"] = "head"
    init_from: str | None = None
    train: RewardTrainConfig = Field(default_factory=RewardTrainConfig)
    eval: RewardEvalConfig = Field(default_factory=RewardEvalConfig)
