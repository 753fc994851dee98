"""Typed configs of the commands that plan many runs: `study`, `sweep` and `rm matrix`.

Each is a pydantic model, validated in full when the config is read, before any run starts or any
folder is claimed: unknown keys, types (YAML's `true` is no seed), ranges, and every method's or
loss's hyperparameters against the ones its class declares (`objectives.check_method`,
`reward.losses.LossSpec.resolve`). Errors go through `config.validate_config`, which names every
bad key. The `base` section stays a mapping here: each run's config is made from it (base merged
with the run's method, seed and draw) and validated as a RunConfig / RewardConfig by the planner.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_validator

from robustvlm.errors import ConfigError
from robustvlm.objectives import REGISTRY, check_method
from robustvlm.reward.losses import loss_spec
from robustvlm.training.launch import LaunchConfig
from robustvlm.workflows.launchers import JobRunnerConfig

Seed = Annotated[int, Strict(), Field(ge=0)]
PositiveCount = Annotated[int, Strict(), Field(ge=1)]


class HParamEntry(BaseModel):
    """One entry of `methods:` or `losses:`: a name and the hyperparameters the entry fixes (every
    other key)."""

    model_config = ConfigDict(extra="allow")

    @property
    def args(self) -> dict[str, Any]:
        """The hyperparameters the entry fixes."""
        return dict(self.model_extra or {})


class MethodEntry(HParamEntry):
    """`{method: NAME, <hyperparameter>: value, ...}` of a study or sweep."""

    method: str

    @field_validator("method")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name not in REGISTRY:
            raise ValueError(f"unknown method {name!r}; choose one of {sorted(REGISTRY)}")
        return name

    @model_validator(mode="after")
    def _hyperparameters(self) -> MethodEntry:
        try:
            check_method(self.method, self.args, "hyperparameters")
        except ConfigError as err:
            raise ValueError(str(err)) from None
        return self


class LossEntry(HParamEntry):
    """`{loss: NAME, <hyperparameter>: value, ...}` of a reward-model matrix."""

    loss: str

    @model_validator(mode="after")
    def _hyperparameters(self) -> LossEntry:
        try:
            loss_spec(self.loss).resolve(self.args)
        except ConfigError as err:
            raise ValueError(str(err)) from None
        return self


class _MultiRunConfig(BaseModel):
    """`base` (a run config without the per-run part) and `seeds`, shared by the three."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    #: Keys each run sets itself, given under `methods` / `losses`, never in base.
    per_run_keys: ClassVar[tuple[str, str]]

    base: dict[str, Any]
    seeds: list[Seed] = Field(default_factory=lambda: [0], min_length=1)

    @field_validator("base")
    @classmethod
    def _no_per_run_keys_in_base(cls, base: dict[str, Any]) -> dict[str, Any]:
        if set(cls.per_run_keys) & set(base):
            what = "methods" if "method" in cls.per_run_keys else "losses"
            raise ValueError(f"{', '.join(cls.per_run_keys)} are given under `{what}`, not in base")
        return base

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"a list of distinct integers is required (got {seeds})")
        return seeds


class _MethodsConfig(_MultiRunConfig):
    per_run_keys = ("method", "method_args")

    methods: dict[str, MethodEntry] = Field(min_length=1)


class StudyConfig(_MethodsConfig):
    """`robustvlm study` (see `workflows.finetune.study`)."""

    metrics: list[str] | None = Field(None, min_length=1)
    launch: LaunchConfig | None = None


class ReferenceEntry(BaseModel):
    """Published figures a sweep prints beside its own: a packaged reference and our environment."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    env: str


class SweepConfig(_MethodsConfig):
    """`robustvlm sweep` (see `workflows.finetune.sweep` for each key)."""

    n_draws: PositiveCount = 3
    search: dict[str, Any] | None = None
    checkpoint_every: PositiveCount | None = None
    holdout_fraction: float = Field(0.2, gt=0, lt=1)
    test_envs: list[str] | None = Field(None, min_length=1)
    metric: str = "exact"
    headline_env: str | None = None
    reference: ReferenceEntry | None = None
    launcher: JobRunnerConfig = Field(default_factory=JobRunnerConfig)


class MatrixConfig(_MultiRunConfig):
    """`robustvlm rm matrix` (see `workflows.reward.matrix`)."""

    per_run_keys = ("loss", "loss_args")

    losses: dict[str, LossEntry] = Field(min_length=1)
    train_envs: list[str] | None = Field(None, min_length=1)
    per_env: dict[str, Any] = Field(default_factory=dict)
    text_only: str | None = None
    jobs: PositiveCount = 1

    @model_validator(mode="after")
    def _text_only_label(self) -> MatrixConfig:
        if self.text_only is not None and self.text_only not in self.losses:
            raise ValueError(f"text_only names {self.text_only!r}, which is not a label of `losses`")
        return self
