"""The typed config of `robustvlm grid` (`workflows.eval_grid`): models x benchmarks x shards of one
scoring command, run through a launcher.

    command: mc eval              # or eval
    models: [tiny:idefics3, tiny:clip]          # a list, or {label: model}
    benchmarks: {digits: q/digits.jsonl}        # a list, or {label: path}: mc eval's --benchmark, eval's --data
    shards: 2                     # each (model, benchmark) split with --shard I/N, then merged
    options: {batch-size: 4}      # more options of the command, for every cell (true: a flag)
    launcher: {kind: local}       # local | multi-gpu | slurm (`workflows.launchers`)

A label names the folder of its model or benchmark: given in a mapping, else made from the name
(`tiny:clip` -> `tiny_clip`, `q/digits.jsonl` -> `digits`). Paths are read from the folder the
command runs in, as on a command line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_validator

from robustvlm.workflows.launchers import JobRunnerConfig

#: the scoring commands a grid runs -> the option that names a benchmark's data
DATA_OPTION = {"mc eval": "--benchmark", "eval": "--data"}
#: options the grid sets itself for every cell
SET_BY_GRID = ("model", "benchmark", "data", "out", "shard", "resume")

Entries = Annotated[list[str], Field(min_length=1)] | Annotated[dict[str, str], Field(min_length=1)]
OptionValue = Annotated[bool, Strict()] | int | float | str


class GridConfig(BaseModel):
    """`robustvlm grid` (see the module doc for each key)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    command: Literal["mc eval", "eval"] = "mc eval"
    models: Entries
    benchmarks: Entries
    shards: Annotated[int, Strict(), Field(ge=1)] = 1
    options: dict[str, OptionValue] = Field(default_factory=dict)
    launcher: JobRunnerConfig = Field(default_factory=JobRunnerConfig)

    @field_validator("options")
    @classmethod
    def _not_set_by_grid(cls, options: dict[str, OptionValue]) -> dict[str, OptionValue]:
        taken = sorted(k for k in options if k.removeprefix("--") in SET_BY_GRID)
        if taken:
            raise ValueError(f"{', '.join(taken)}: the grid sets these itself (models, benchmarks, shards, its folders)")
        return options

    @model_validator(mode="after")
    def _distinct_labels(self) -> GridConfig:
        for what in ("models", "benchmarks"):
            labels = [label_of(e, path=what == "benchmarks") for e in getattr(self, what)]
            twice = sorted({label for label in labels if labels.count(label) > 1})
            if isinstance(getattr(self, what), list) and twice:
                raise ValueError(f"{what}: entries share the folder name {', '.join(twice)}; give them as "
                                 "{label: value} to name their folders")
            bad = [k for k in getattr(self, what) if isinstance(getattr(self, what), dict) and
                   (not re.fullmatch(r"[A-Za-z0-9._-]+", k) or k in (".", ".."))]
            if bad:
                raise ValueError(f"{what}: labels name folders: {', '.join(map(repr, bad))} is not a plain folder name "
                                 "(letters, digits, . _ -)")
        return self

    def labelled(self, what: Literal["models", "benchmarks"]) -> dict[str, str]:
        """{label: model or path} of `what` (distinct labels: checked when the config is read)."""
        entries = getattr(self, what)
        if isinstance(entries, dict):
            return dict(entries)
        return {label_of(e, path=what == "benchmarks"): e for e in entries}

    def option_words(self) -> list[str]:
        """`options` as command-line words: `--key value`, `--key` for true, nothing for false."""
        words: list[str] = []
        for key, value in self.options.items():
            flag = "--" + key.removeprefix("--")
            if value is True:
                words.append(flag)
            elif value is not False:
                words += [flag, str(value)]
        return words


def label_of(entry: str, *, path: bool) -> str:
    """A folder name for a model (`tiny:clip` -> `tiny_clip`) or a benchmark path (its stem)."""
    text = Path(entry).stem if path else entry
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.") or "_"
