"""Typed run configuration: YAML files plus `key=value` overrides, validated with pydantic.

One module per config family: `base` (what every section refuses), `model`, `data`, `train`,
`endpoints` (the judge and served models), `evaluation`, `run` (a training run), `reward`,
`embed` and `task_signal`; `loading` reads YAML, applies overrides and validates (its docstring
says how errors read). Every public name is re-exported here: `from robustvlm.config import X`.
"""

from robustvlm.config.data import (
    DataConfig,
    PreferenceDataConfig,
    PreferenceSource,
    RecordSource,
    SplitSizes,
)
from robustvlm.config.embed import (
    QUERY_TEMPLATE,
    EmbedLoraConfig,
    EmbedModelConfig,
    EmbedRunConfig,
    EmbedSettings,
    EmbedTrainConfig,
)
from robustvlm.config.endpoints import (
    MAX_REPLY_BYTES,
    SECRET_FIELDS,
    EndpointConfig,
    JudgeConfig,
    ServedConfig,
)
from robustvlm.config.evaluation import BERTScoreConfig, EvalConfig
from robustvlm.config.loading import (
    Schema,
    apply_overrides,
    deep_merge,
    load_config,
    load_judge_config,
    load_yaml,
    read_yaml_mapping,
    validate_config,
    yaml_problem,
)
from robustvlm.config.model import LoraConfig, ModelConfig
from robustvlm.config.reward import RewardConfig, RewardEvalConfig, RewardTrainConfig
from robustvlm.config.run import RunConfig
from robustvlm.config.task_signal import ProbeSettings, TaskSignalConfig
from robustvlm.config.train import TrainConfig

__all__ = [
    "MAX_REPLY_BYTES",
    "QUERY_TEMPLATE",
    "SECRET_FIELDS",
    "BERTScoreConfig",
    "DataConfig",
    "EmbedLoraConfig",
    "EmbedModelConfig",
    "EmbedRunConfig",
    "EmbedSettings",
    "EmbedTrainConfig",
    "EndpointConfig",
    "EvalConfig",
    "JudgeConfig",
    "LoraConfig",
    "ModelConfig",
    "PreferenceDataConfig",
    "PreferenceSource",
    "ProbeSettings",
    "RecordSource",
    "RewardConfig",
    "RewardEvalConfig",
    "RewardTrainConfig",
    "RunConfig",
    "Schema",
    "ServedConfig",
    "SplitSizes",
    "TaskSignalConfig",
    "TrainConfig",
    "apply_overrides",
    "deep_merge",
    "load_config",
    "load_judge_config",
    "load_yaml",
    "read_yaml_mapping",
    "validate_config",
    "yaml_problem",
]
