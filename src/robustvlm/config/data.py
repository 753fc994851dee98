"""Where a run's records come from: instruction data and preference pairs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from robustvlm.config.base import _Section
from robustvlm.hub_dataset import HubDataset


class SplitSizes(_Section):
    """Records per environment carved into disjoint train / test sets (see `data.carve`)."""

    train: int | None = Field(default=None, ge=1)
    test: int = Field(ge=1)


class RecordSource(_Section):
    """Where records come from, shared by every dataset section (instruction data, preferences).

    Give `path` (a data file or folder, or `hf:NAME[:CONFIG]`) or `benchmark` (a built-in
    synthetic benchmark, generated into the run directory). `split_per_env` re-splits every
    environment into fixed-size train / test sets (seed `seed`). `image_root`: folder of
    relative image paths in record files (default: the data file's folder); image paths that
    leave it (absolute, `../`, symlinks) are bad records unless `allow_outside_root`.
    """

    path: str | None = None
    benchmark: str | None = None
    seed: int = Field(default=0, ge=0)
    n_per_env: int | None = Field(default=None, ge=1)
    format: str = "auto"
    env_column: str | None = None
    on_bad_record: Literal["error", "skip"] = "error"
    max_pixels: int = Field(default=40_000_000, ge=1)
    max_train_per_env: int | None = Field(default=None, ge=1)
    split_per_env: SplitSizes | None = None
    image_root: str | None = None
    allow_outside_root: bool = False

    @property
    def on_hub(self) -> bool:
        """True when `path` names a Hugging Face hub dataset (`hf:NAME[:CONFIG]`)."""
        return self.path is not None and HubDataset.parse(self.path) is not None

    @model_validator(mode="after")
    def _one_source(self) -> RecordSource:
        if (self.path is None) == (self.benchmark is None):
            raise ValueError("give exactly one of data.path or data.benchmark")
        return self


class DataConfig(RecordSource):
    """Instruction data: a `RecordSource` and how environments are assigned.

    `subsets` loads several hub configs of one `hf:NAME` dataset (each record's `subset` field
    names its config) and `max_rows_per_subset` samples each before images are read.
    `holdout_fraction` holds out DomainBed's "out" split of every environment as split `val`
    (see `data.carve.hold_out`): training environments' validation records, and the part of each
    out-of-domain environment that only a test-domain (oracle) selection may look at.
    """

    holdout_fraction: float | None = Field(default=None, gt=0, lt=1)
    env_map: str | dict[str, Any] | None = None  # a YAML file, or the map itself inline
    task_rules: bool = False
    instruction_template: str = "What is shown in this image?"
    subsets: list[str] = Field(default_factory=list)
    max_rows_per_subset: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _hub_options(self) -> DataConfig:
        if (self.subsets or self.max_rows_per_subset is not None) and not self.on_hub:
            raise ValueError("subsets and max_rows_per_subset need data.path: hf:NAME")
        return self


class PreferenceSource(_Section):
    """One preference dataset of `data.sources`; its name there is its environment."""

    path: str
    format: str = "auto"
    split: str | None = None
    image_root: str | None = None


class PreferenceDataConfig(RecordSource):
    """Preference pairs (`id, image, query, chosen, rejected, env`, optional `margin`).

    Give exactly one of `path`, `benchmark` (the built-in `preferences`) or `sources`
    (several datasets, each its own environment: `{name: {path, format, split, image_root}}`).
    `format` names the layout (`auto` recognises it from the columns; see
    `robustvlm.data.preference_layouts`); `split` keeps (and for `hf:` loads) one split;
    `aspect` is the VLFeedback rating pairs are formed by (an aspect name or `mean`); `envs`
    keeps only these environments; `max_length` caps sequences in tokens (image tokens included).
    """

    sources: dict[str, PreferenceSource] = Field(default_factory=dict)
    split: str | None = None
    aspect: str = "mean"
    envs: list[str] | None = None
    max_length: int | None = Field(default=None, ge=8)

    @model_validator(mode="after")
    def _one_source(self) -> PreferenceDataConfig:
        given = [k for k in ("path", "benchmark", "sources") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("give exactly one of data.path, data.benchmark or data.sources")
        return self
