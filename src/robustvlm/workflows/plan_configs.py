"""Typed configs of the commands that plan many runs: `study`, `sweep` and `rm matrix`.

Each is a pydantic model, validated in full when the config is read, before any run starts or any
folder is claimed: unknown keys, types (YAML's `true` is no seed), ranges, and every method's or
loss's hyperparameters against the ones its class declares (`objectives.check_method`,
`reward.losses.LossSpec.resolve`). Errors go through `config.validate_config`, which names every
bad key. The `base` section stays a mapping here: each run's config is made from it (base merged
with the run's method, seed and draw) and validated as a RunConfig / RewardConfig by the planner.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    field_validator,
    model_validator,
)

from robustvlm.errors import ConfigError
from robustvlm.evaluation.metrics.registry import per_batch_metrics
from robustvlm.objectives import REGISTRY, check_method
from robustvlm.reward.losses import loss_spec
from robustvlm.training.launch import LaunchConfig
from robustvlm.workflows.launchers import JobRunnerConfig

Seed = Annotated[int, Strict(), Field(ge=0)]
PositiveCount = Annotated[int, Strict(), Field(ge=1)]
#: The kinds of search rule (`objectives.base.HParam.search`).
SEARCH_KINDS = ("log", "int_log", "uniform", "choice")
#: The optimizer settings a sweep's `search:` may give ranges to.
SEARCHED_OPTIMIZER_KEYS = ("lr", "weight_decay")


def _search_rule(rule: Any) -> tuple[Any, ...]:
    """A search rule as a tuple: [log|int_log|uniform, lo, hi] (numbers) or [choice, v1, ...]."""
    if (
        not isinstance(rule, list | tuple)
        or len(rule) < 2
        or rule[0] not in SEARCH_KINDS
        or (rule[0] != "choice" and (len(rule) != 3 or not all(isinstance(v, int | float) for v in rule[1:])))
    ):
        raise ValueError("a rule [log|int_log|uniform, lo, hi] or [choice, v1, ...] is required")
    return tuple(rule)


SearchRule = Annotated[Any, AfterValidator(_search_rule)]


def warn_renamed(old: str, new: str, where: str) -> None:
    """Tell the user (stderr) that config key `old` is now `new`; the old name is accepted for one
    release."""
    print(f"deprecated: {where}: `{old}:` is now called `{new}:`; `{old}:` is accepted until the "
          "next release", file=sys.stderr)


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
    launcher: LaunchConfig | None = None
    zero_shot: bool = False

    @model_validator(mode="before")
    @classmethod
    def _renamed_launch(cls, data: Any) -> Any:
        """`launch:` (its name before `launcher:`, as in sweep configs) is accepted for one release."""
        if isinstance(data, dict) and "launch" in data:
            if "launcher" in data:
                raise ValueError("give `launcher` only (`launch` is its old name)")
            warn_renamed("launch", "launcher", "study config")
            data = {("launcher" if key == "launch" else key): value for key, value in data.items()}
        return data


class ReferenceEntry(BaseModel):
    """Published figures a sweep prints beside its own: a packaged reference and our environment."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    env: str


class SweepConfig(_MethodsConfig):
    """`robustvlm sweep` (see `workflows.finetune.sweep` for each key)."""

    n_draws: PositiveCount = 3
    search: dict[str, SearchRule] | None = None
    checkpoint_every: PositiveCount | None = None
    holdout_fraction: float = Field(0.2, gt=0, lt=1)
    test_envs: list[str] | None = Field(None, min_length=1)
    metric: str = "exact"
    headline_env: str | None = None
    reference: ReferenceEntry | None = None
    launcher: JobRunnerConfig = Field(default_factory=JobRunnerConfig)

    @field_validator("search")
    @classmethod
    def _optimizer_keys(cls, search: dict[str, tuple[Any, ...]] | None) -> dict[str, tuple[Any, ...]] | None:
        unknown = sorted(set(search or {}) - set(SEARCHED_OPTIMIZER_KEYS))
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: only lr and weight_decay are searched here; method "
                             "hyperparameters use their objective's declared ranges")
        return search

    @field_validator("metric")
    @classmethod
    def _per_example(cls, metric: str) -> str:
        per_batch = [m.name for m in per_batch_metrics()]
        if metric not in per_batch:
            raise ValueError(f"{metric!r} is not a per-example accuracy; choose one of {per_batch}")
        return metric


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
