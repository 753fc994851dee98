"""Typed run configuration: YAML files plus `key=value` overrides, validated with pydantic.

A wrong key or a value of the wrong type raises ConfigError naming the key, e.g.
`train.lr: Input should be a valid number (got 'fast')`; a misspelled key gets the closest known
one as a suggestion (difflib), a key given twice in one YAML mapping is an error (YAML would keep
the last silently), and so is an override without a value (`train.steps=`: use `null` to unset).
"""

from __future__ import annotations

import copy
import difflib
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, overload

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from robustvlm.errors import ConfigError
from robustvlm.extras import require
from robustvlm.model_ref import ModelRef
from robustvlm.redact import check_url, check_variable_name, redact, secret_name


class _Section(BaseModel):
    """Base of every config section: unknown keys are errors, and no number setting takes NaN or
    an infinity (`.nan`, `.inf`, `1e400`): it would train or score silently wrong."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, raw: Any) -> Any:
        """YAML's `true` is no number: pydantic would read it as 1 (a seed, a step count)."""
        if isinstance(raw, dict):
            for name, field in cls.model_fields.items():
                value = raw.get(name)
                values = value if isinstance(value, list) else [value]
                if any(isinstance(v, bool) for v in values) and _takes_numbers(field.annotation):
                    raise ValueError(f"{name}: expected a number, got a boolean ({value!r})")
        return raw


def _takes_numbers(annotation: Any) -> bool:
    """Whether a field's type holds int or float (directly, in a union or a list) and no bool."""
    seen: set[Any] = set()

    def walk(tp: Any) -> None:
        seen.add(tp)
        for arg in get_args(tp):
            walk(arg)

    walk(annotation)
    return bool(seen & {int, float}) and bool not in seen


class LoraConfig(_Section):
    """PEFT LoRA settings (used when `model.trainable: lora`)."""

    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.05, ge=0, lt=1)
    target_modules: list[str] | str | None = None


class ModelConfig(_Section):
    """Which VLM to fine-tune and which parts train.

    `name` is a hub name (e.g. HuggingFaceTB/SmolVLM-Base), a local path, or
    `tiny:<model_type>` (an architecture of `models.support`, built offline, tokenizer trained on the
    training text).
    `gradient_checkpointing` recomputes activations in the backward pass instead of storing them
    (a real 2B VLM with hundreds of image tokens needs it; results are unchanged).
    """

    name: str = "tiny:idefics3"
    trust_remote_code: bool = False
    trainable: Literal["paper", "full", "lora"] = "paper"
    lora: LoraConfig = Field(default_factory=LoraConfig)
    gradient_checkpointing: bool = False
    tiny: dict[str, Any] = Field(default_factory=dict)

    @property
    def ref(self) -> ModelRef:
        """`name` parsed (`model_ref.ModelRef`): its kind, location and capabilities."""
        return ModelRef.parse(self.name)


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
        return self.path is not None and self.path.startswith("hf:")

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


class BERTScoreConfig(_Section):
    """BERTScore encoder: any HF encoder name/path and layer (default: offline all-MiniLM-L6-v2)."""

    model: str | None = None
    layer: int | None = Field(default=None, ge=0)
    idf: bool = False
    batch_size: int = Field(default=32, ge=1)


MAX_REPLY_BYTES = 1 << 20  # 1 MiB: far above any reply at the max_tokens this project asks for
SECRET_FIELDS = {"base_url", "api_key_env"}  # values never echoed in errors


class EndpointConfig(_Section):
    """An OpenAI-compatible endpoint and how to send requests to it (shared by the CEE judge,
    `rm sample --server` and served models): the key only through an environment variable; the
    URL and the variable's name as `robustvlm.redact` allows."""

    base_url: str = Field(description="OpenAI-compatible API root, e.g. http://localhost:8000/v1")
    api_key_env: str | None = Field(default=None, description="NAME of the env variable holding the key")
    timeout_s: float = Field(default=60.0, gt=0.0, description="seconds per HTTP request")
    max_concurrency: int = Field(default=8, ge=1, description="requests in flight at once")
    max_retries: int = Field(default=5, ge=0, description="retries after the first attempt")
    backoff_s: float = Field(default=1.0, ge=0.0, description="first retry delay; doubles each retry")
    max_reply_bytes: int = Field(
        default=MAX_REPLY_BYTES, ge=1024,
        description="largest reply body read (bytes); a larger reply fails its request, unread past the limit",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secret(cls, raw: Any) -> Any:
        names = raw if isinstance(raw, dict) else {}
        inline = sorted(str(k) for k in names if str(k) != "api_key_env" and secret_name(str(k)))
        if inline:
            raise ValueError(
                f"{inline[0]}: a key written in a config would be copied into every run folder; put "
                "it in an environment variable and give that variable's NAME as api_key_env"
            )
        return raw

    @field_validator("base_url")
    @classmethod
    def _usable_url(cls, url: str) -> str:
        return check_url(url)

    @field_validator("api_key_env")
    @classmethod
    def _a_variable_name(cls, name: str | None) -> str | None:
        return None if name is None else check_variable_name(name)


class JudgeConfig(EndpointConfig):
    """Where and how to ask the CEE judge model (`eval.judge`): an OpenAI-compatible endpoint."""

    model: str = Field(
        description="model name sent in each request, e.g. Qwen/Qwen2.5-32B-Instruct"
    )
    temperature: float = Field(default=0.0, ge=0.0)
    max_tokens: int = Field(default=64, gt=0, description="reply length limit per verdict")


class ServedConfig(EndpointConfig):
    """A model behind an OpenAI-compatible server (`--model openai:MODEL --base-url URL`):
    greedy (temperature 0) chat completions, answers kept in the response cache unless `cache`
    is false (`models.response_cache`)."""

    cache: bool = Field(default=True, description="reuse answers from the response cache (ROBUSTVLM_CACHE)")
    adaptive_concurrency: bool = Field(
        default=False, description="learn the requests in flight, from 8 up to max_concurrency, from the replies "
        "(AIMD: models.concurrency) instead of keeping max_concurrency in flight")


class EvalConfig(_Section):
    """Generation and scoring settings: greedy, 128 new tokens, no repetition penalty (1.0), the
    same for a local and a served model (the Dynamic BIRM paper's recipe sets 1.15 explicitly).

    `metrics` names metrics of `robustvlm.evaluation.metrics.registry` (checked there, where the
    config is used, since this layer does not know them): chrF and exact match are always
    computed; `bertscore` and `cee` (the LLM-judge ensemble, which needs `judge`: an
    OpenAI-compatible endpoint) are added after generation.
    """

    metrics: list[str] = Field(default_factory=lambda: ["chrf", "exact"])
    bertscore: BERTScoreConfig = Field(default_factory=BERTScoreConfig)
    judge: JudgeConfig | None = None
    split: str = "test"
    batch_size: int = Field(default=8, ge=1)
    max_new_tokens: int = Field(default=128, ge=1)
    repetition_penalty: float = Field(default=1.0, gt=0, description="1.0: none (every command's default)")
    max_per_env: int | None = Field(default=None, ge=1)


class _Run(_Section):
    """What every kind of training run has: the model it trains."""

    model: ModelConfig = Field(default_factory=ModelConfig)


class RunConfig(_Run):
    """A training run: model, data, method (+ its hyperparameters), training and evaluation."""

    data: DataConfig
    method: str = "erm"
    method_args: dict[str, Any] = Field(default_factory=dict)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)


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



#: The instruction around a question in a VLM2Vec query (the paper's wording).
QUERY_TEMPLATE = "Represent the given image with the following question: {question}"


class EmbedLoraConfig(LoraConfig):
    """LoRA as VLM2Vec ships it: rank 16, alpha 64, dropout 0.1."""

    alpha: int = Field(default=64, ge=1)
    dropout: float = Field(default=0.1, ge=0, lt=1)


class EmbedModelConfig(ModelConfig):
    """The VLM turned into an embedding model: LoRA on its text decoder by default."""

    trainable: Literal["paper", "full", "lora"] = "lora"
    lora: EmbedLoraConfig = Field(default_factory=EmbedLoraConfig)


class EmbedTrainConfig(TrainConfig):
    """Optimisation of an embedding model: plain shuffled batches by default (in-batch negatives
    need no environment balance)."""

    sampler: Literal["balanced", "shuffle"] = "shuffle"


class EmbedSettings(_Section):
    """Contrastive (InfoNCE) embedding training (`robustvlm embed train`).

    `chunk_size` turns on gradient caching: the batch is embedded `chunk_size` rows at a time
    (memory of one chunk, the same loss and gradients); None embeds the whole batch in one pass.
    Records of environments matching a `caption_envs` pattern (fnmatch, e.g. "caption*" or "*")
    are caption pairs, whose query is the image alone; all others are VQA pairs, whose query is
    the image with `query_template` filled with the record's instruction. `class_templates` are
    what zero-shot classification fills with class names (saved with the model).
    `distinct_negatives`: a target with the same text as a row's own target is no negative of it
    (robustvlm's option, not VLM2Vec's: its InfoNCE counts every other in-batch target as a
    negative, the default here too; with few distinct answers most of a batch would be false
    negatives, which is why the task-signal experiment turns it on).
    """

    temperature: float = Field(default=0.02, gt=0)
    chunk_size: int | None = Field(default=None, ge=1)
    query_template: str = QUERY_TEMPLATE
    caption_envs: list[str] = Field(default_factory=list)
    class_templates: list[str] = Field(default_factory=lambda: ["{class}"])
    distinct_negatives: bool = False

    @model_validator(mode="after")
    def _templates(self) -> EmbedSettings:
        if "{question}" not in self.query_template:
            raise ValueError("embed.query_template must hold {question}")
        if not self.class_templates or any("{class}" not in t for t in self.class_templates):
            raise ValueError("embed.class_templates must be non-empty and each hold {class}")
        return self


class EmbedRunConfig(_Section):
    """An embedding training run: model, data, embedding settings, training."""

    model: EmbedModelConfig = Field(default_factory=EmbedModelConfig)
    data: DataConfig
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    train: EmbedTrainConfig = Field(default_factory=EmbedTrainConfig)


class ProbeSettings(_Section):
    """The linear-probe family: logistic regression on the frozen tower's features of
    `n_train` training images (each size x seed is one model), L2 strength 1 / `c`."""

    n_train: list[PositiveInt] = Field(default_factory=lambda: [40, 80, 160, 320])
    seeds: list[NonNegativeInt] = Field(default_factory=lambda: [0, 1])
    c: float = Field(default=1.0, gt=0)


class TaskSignalConfig(_Section):
    """The task-signal experiment (`robustvlm robustness task-signal`) on the `domains` digits.
    The packaged configs/task_signal.yaml holds the built-in values; a user's config is merged
    over it.

    One base VLM is built (and pretrained generatively for `base_steps` on the training images'
    captions and questions alike; 0: a hub model as it is), its vision tower frozen for every
    family. Each family trains
    embedding models (`model`, `train`, `embed` as in `embed train`) on the same training images
    with a share `families[name]` of VQA pairs (0 = captions only, 1 = questions only), for every
    seed x budget (optimizer steps). Images: `per_class` scans per digit and style; a seeded
    `test_fraction` of the scans is held out in every style. Training images: the other scans in
    `train_styles`; reference: held-out scans in `reference`; shifts: held-out scans in each of
    `shifts`. Questions have `k_options` options (random distractors).
    """

    per_class: int = Field(default=60, ge=2)
    test_fraction: float = Field(default=0.25, gt=0, lt=1)
    reference: str = "clean"
    train_styles: list[str] = Field(default_factory=lambda: ["clean", "rotated", "noisy"])
    shifts: list[str] = Field(default_factory=lambda: ["rotated", "noisy", "coloured"])
    k_options: int = Field(default=10, ge=2, le=10)
    base_steps: int = Field(default=300, ge=0)
    families: dict[str, float] = Field(default_factory=lambda: {"caption": 0.0, "mix": 0.5, "vqa": 1.0})
    seeds: list[NonNegativeInt] = Field(default_factory=lambda: [0, 1])
    budgets: list[PositiveInt] = Field(default_factory=lambda: [100, 200, 400])
    model: EmbedModelConfig = Field(default_factory=lambda: EmbedModelConfig(trainable="paper"))
    train: EmbedTrainConfig = Field(default_factory=EmbedTrainConfig)
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    probe: ProbeSettings = Field(default_factory=ProbeSettings)
    n_boot: int = Field(default=2000, ge=100)
    workers: int = Field(default=2, ge=1)

    @model_validator(mode="after")
    def _check(self) -> TaskSignalConfig:
        if not self.families or any(not 0 <= s <= 1 for s in self.families.values()):
            raise ValueError("families: give {name: VQA share in [0, 1]}")
        if "caption" not in self.families or "vqa" not in self.families:
            raise ValueError("families must include 'caption' (share 0) and 'vqa' (share 1): the lift is vqa over caption")
        if self.families["caption"] != 0 or self.families["vqa"] != 1:
            raise ValueError("families.caption must be 0 and families.vqa 1")
        if self.reference not in self.train_styles:
            raise ValueError("reference must be one of train_styles")
        if len(self.seeds) * len(self.budgets) < 2:
            raise ValueError("a family line needs at least two models: give more seeds or budgets")
        return self


Schema = TypeVar("Schema", bound=BaseModel)


def deep_merge(base: dict, extra: dict) -> dict:
    """A copy of `base` with `extra` merged in: values of `extra` win; nested mappings merge."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        both_dicts = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = deep_merge(out[key], value) if both_dicts else value
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml's SafeLoader, but a key given twice in one mapping is an error, not the last kept."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark
                )
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load` that refuses a key given twice in one mapping (a yaml.YAMLError)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and on which line."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        mark = err.problem_mark
        return err.problem + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark else "")
    return str(err).splitlines()[0]


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply `a.b.c=value` overrides (values parsed as YAML) to a nested dict, in place.
    ConfigError naming the override when it has no key, no value or a value that is not YAML."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' is not of the form key=value")
        key, value = item.split("=", 1)
        if not key.strip():
            raise ConfigError(f"override '{item}' names no key")
        if not value.strip():
            raise ConfigError(
                f"override '{item}' has no value; give one, or {key.strip()}=null to unset it"
            )
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ConfigError(f"override '{item}': the value is not valid YAML: {yaml_problem(err)}") from None
        node = raw
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override '{key}': '{part}' is not a section")
            node = child
        node[parts[-1]] = parsed
    return raw


def _known_keys(schema: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the section at `loc` (a path of keys from `schema`) accepts; [] where it is not a
    config section (a free mapping, a list)."""
    model: Any = schema
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return []
        sections = [t for t in (field.annotation, *get_args(field.annotation))
                    if isinstance(t, type) and issubclass(t, BaseModel)]
        if not sections:
            return []
        model = sections[0]
    return list(model.model_fields)


def _unknown_key(schema: type[BaseModel], loc: tuple) -> str:
    """"unknown key", with the closest key the section knows as a suggestion."""
    close = difflib.get_close_matches(str(loc[-1]), _known_keys(schema, loc[:-1]), n=1) if loc else []
    return f"unknown key; did you mean {close[0]!r}?" if close else "unknown key"


def _describe(err: ValidationError, source: str, schema: type[BaseModel]) -> str:
    lines = [f"{source}: invalid configuration"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = _unknown_key(schema, e["loc"]) if e["type"] == "extra_forbidden" else e["msg"]
        echo = (
            e["type"] != "extra_forbidden"
            and "input" in e
            and not isinstance(e["input"], dict)
            and not SECRET_FIELDS & {str(p) for p in e["loc"]}
        )
        got = f" (got {e['input']!r})" if echo else ""
        lines.append(f"  {key}: {msg}{got}")
    return redact("\n".join(lines))


@overload
def validate_config(raw: dict, source: str = ...) -> RunConfig: ...
@overload
def validate_config(raw: dict, source: str, schema: type[Schema]) -> Schema: ...
@overload
def validate_config(raw: dict, source: str = ..., *, schema: type[Schema]) -> Schema: ...
def validate_config(
    raw: dict, source: str = "config", schema: type[BaseModel] = RunConfig
) -> BaseModel:
    """Validate a nested dict as a `schema` (a RunConfig by default); ConfigError names every
    bad key."""
    try:
        return schema.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_describe(err, source, schema)) from None


def read_yaml_mapping(path: str | Path, what: str = "config", expected: str = "sections") -> dict:
    """A YAML file whose top level is a mapping (an empty file is {}); ConfigError naming the
    file when it is missing, not YAML, or not a mapping of `expected`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: {what} file not found")
    try:
        data = load_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {yaml_problem(err)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of {expected}")
    return data


def load_judge_config(path: str | Path) -> JudgeConfig:
    """The judge (or served-model) endpoint settings of a YAML file; ConfigError naming the file
    and every bad key, never echoing a secret."""
    return validate_config(
        read_yaml_mapping(path, "judge config", "judge settings"), str(path), JudgeConfig
    )


@overload
def load_config(path: str | Path, overrides: list[str] | None = ...) -> RunConfig: ...
@overload
def load_config(
    path: str | Path, overrides: list[str] | None, schema: type[Schema]
) -> Schema: ...
@overload
def load_config(
    path: str | Path, overrides: list[str] | None = ..., *, schema: type[Schema]
) -> Schema: ...
def load_config(
    path: str | Path, overrides: list[str] | None = None, schema: type[BaseModel] = RunConfig
) -> BaseModel:
    """Read a YAML config, apply overrides, validate as `schema` (a RunConfig by default)."""
    raw = read_yaml_mapping(path)
    return validate_config(apply_overrides(raw, overrides or []), str(path), schema)
