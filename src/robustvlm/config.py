"""Typed run configuration: YAML files plus `key=value` overrides, validated with pydantic.

A wrong key or a value of the wrong type raises ConfigError naming the key, e.g.
`train.lr: Input should be a valid number (got 'fast')`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robustvlm.errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class LoraConfig(_Section):
    """PEFT LoRA settings (used when `model.trainable: lora`)."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] | str | None = None


class ModelConfig(_Section):
    """Which VLM to fine-tune and which parts train.

    `name` is a hub name (e.g. HuggingFaceTB/SmolVLM-Base), a local path, or
    `tiny:idefics3` / `tiny:llava` (built offline, tokenizer trained on the training text).
    `gradient_checkpointing` recomputes activations in the backward pass instead of storing them
    (a real 2B VLM with hundreds of image tokens needs it; results are unchanged).
    """

    name: str = "tiny:idefics3"
    trust_remote_code: bool = False
    trainable: Literal["paper", "full", "lora"] = "paper"
    lora: LoraConfig = Field(default_factory=LoraConfig)
    gradient_checkpointing: bool = False
    tiny: dict[str, Any] = Field(default_factory=dict)


class SplitSizes(_Section):
    """Records per environment carved into disjoint train / test sets (see `data.carve`)."""

    train: int | None = Field(default=None, ge=1)
    test: int = Field(ge=1)


class DataConfig(_Section):
    """Where the records come from and how environments are assigned.

    Give `path` (a data dir/JSONL/LLaVA JSON/parquet/`hf:NAME[:CONFIG]`/image folder) or
    `benchmark` (a built-in synthetic benchmark, generated into the run directory).
    `subsets` loads several hub configs of one `hf:NAME` dataset (each record's `subset` field
    names its config), `max_rows_per_subset` samples each before images are read, and
    `split_per_env` re-splits every environment into fixed-size train / test sets (seed `seed`).
    `holdout_fraction` holds out DomainBed's "out" split of every environment as split `val`
    (see `data.carve.hold_out`): training environments' validation records, and the part of each
    out-of-domain environment that only a test-domain (oracle) selection may look at.
    `image_root`: folder of relative image paths in record files (default: the data file's folder).
    """

    path: str | None = None
    benchmark: str | None = None
    seed: int = 0
    n_per_env: int | None = None
    format: str = "auto"
    env_column: str | None = None
    env_map: str | dict[str, Any] | None = None  # a YAML file, or the map itself inline
    task_rules: bool = False
    instruction_template: str = "What is shown in this image?"
    on_bad_record: Literal["error", "skip"] = "error"
    max_pixels: int = 40_000_000
    max_train_per_env: int | None = None
    subsets: list[str] = Field(default_factory=list)
    max_rows_per_subset: int | None = Field(default=None, ge=1)
    split_per_env: SplitSizes | None = None
    holdout_fraction: float | None = Field(default=None, gt=0, lt=1)
    image_root: str | None = None

    @property
    def on_hub(self) -> bool:
        """True when `path` names a Hugging Face hub dataset (`hf:NAME[:CONFIG]`)."""
        return self.path is not None and self.path.startswith("hf:")

    @model_validator(mode="after")
    def _one_source(self) -> DataConfig:
        if (self.path is None) == (self.benchmark is None):
            raise ValueError("give exactly one of data.path or data.benchmark")
        if (self.subsets or self.max_rows_per_subset is not None) and not self.on_hub:
            raise ValueError("subsets and max_rows_per_subset need data.path: hf:NAME")
        return self


class TrainConfig(_Section):
    """Optimisation settings (defaults follow the Dynamic BIRM paper where it states them).

    `report_to` names experiment trackers Accelerate logs to besides train_log.jsonl
    (e.g. [tensorboard], [wandb], [mlflow]; each needs its package installed); off by default.
    """

    steps: int | None = None
    epochs: float = 1.0
    lr: float = 3e-5
    weight_decay: float = 0.0
    batch_size: int = 4
    grad_accum: int = 1
    warmup_ratio: float = 0.1
    clip_norm: float = 1.0
    seed: int = 0
    bf16: Literal["auto", True, False] = "auto"
    sampler: Literal["balanced", "shuffle"] = "balanced"
    save_every: int = 100
    keep_checkpoints: int = 2
    log_every: int = 1
    cpu_threads: int | None = None
    report_to: list[str] = Field(default_factory=list)


class BERTScoreConfig(_Section):
    """BERTScore encoder: any HF encoder name/path and layer (default: offline all-MiniLM-L6-v2)."""

    model: str | None = None
    layer: int | None = None
    idf: bool = False
    batch_size: int = 32


class JudgeConfig(_Section):
    """Where and how to ask the CEE judge model (`eval.judge`): an OpenAI-compatible endpoint."""

    base_url: str = Field(description="OpenAI-compatible API root, e.g. http://localhost:8000/v1")
    model: str = Field(
        description="model name sent in each request, e.g. Qwen/Qwen2.5-32B-Instruct"
    )
    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int = Field(64, gt=0, description="reply length limit per verdict")
    api_key_env: str | None = Field(None, description="NAME of the env variable holding the key")
    timeout_s: float = Field(60.0, gt=0.0, description="seconds per HTTP request")
    max_concurrency: int = Field(8, ge=1, description="requests in flight at once")
    max_retries: int = Field(5, ge=0, description="retries after the first attempt")
    backoff_s: float = Field(1.0, ge=0.0, description="first retry delay; doubles each retry")


class EvalConfig(_Section):
    """Generation and scoring settings (paper: greedy, 128 new tokens, repetition penalty 1.15).

    `metrics` names metrics of `robustvlm.evaluation.metrics.registry` (checked there, where the
    config is used, since this layer does not know them): chrF and exact match are always
    computed; `bertscore` and `cee` (the LLM-judge ensemble, which needs `judge`: an
    OpenAI-compatible endpoint) are added after generation.
    """

    metrics: list[str] = Field(default_factory=lambda: ["chrf", "exact"])
    bertscore: BERTScoreConfig = Field(default_factory=BERTScoreConfig)
    judge: JudgeConfig | None = None
    split: str = "test"
    batch_size: int = 8
    max_new_tokens: int = 128
    repetition_penalty: float = 1.15
    max_per_env: int | None = None


class RunConfig(_Section):
    """A training run: model, data, method (+ its hyperparameters), training and evaluation."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig
    method: str = "erm"
    method_args: dict[str, Any] = Field(default_factory=dict)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)


def deep_merge(base: dict, extra: dict) -> dict:
    """A copy of `base` with `extra` merged in: values of `extra` win; nested mappings merge."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        both_dicts = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = deep_merge(out[key], value) if both_dicts else value
    return out


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply `a.b.c=value` overrides (values parsed as YAML) to a nested dict, in place."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' is not of the form key=value")
        key, value = item.split("=", 1)
        node = raw
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override '{key}': '{part}' is not a section")
            node = child
        node[parts[-1]] = yaml.safe_load(value)
    return raw


def _describe(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        got = (
            f" (got {e['input']!r})"
            if e["type"] != "extra_forbidden" and "input" in e and not isinstance(e["input"], dict)
            else ""
        )
        lines.append(f"  {key}: {msg}{got}")
    return "\n".join(lines)


def validate_config(raw: dict, source: str = "config") -> RunConfig:
    """Validate a nested dict as a RunConfig; ConfigError names every bad key."""
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_describe(err, source)) from None


def read_yaml_mapping(path: str | Path, what: str = "config", expected: str = "sections") -> dict:
    """A YAML file whose top level is a mapping (an empty file is {}); ConfigError naming the
    file when it is missing, not YAML, or not a mapping of `expected`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: {what} file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of {expected}")
    return data


def load_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML config, apply overrides, validate."""
    raw = read_yaml_mapping(path)
    return validate_config(apply_overrides(raw, overrides or []), str(path))
