"""robustvlm.data: records, image loading, dataset loaders, environments and dataset checks."""

from robustvlm.data.check import CheckReport, check_dataset
from robustvlm.data.environments import (
    TASK_RULES,
    TASK_TYPES,
    EnvMap,
    assign_task_type,
    env_counts,
    format_env_counts,
    load_env_map,
)
from robustvlm.data.images import DEFAULT_MAX_PIXELS, load_image, to_rgb
from robustvlm.data.loaders import FORMATS, load_examples, read_examples
from robustvlm.data.records import SPLITS, Example, SkipLog

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "FORMATS",
    "SPLITS",
    "TASK_RULES",
    "TASK_TYPES",
    "CheckReport",
    "EnvMap",
    "Example",
    "SkipLog",
    "assign_task_type",
    "check_dataset",
    "env_counts",
    "format_env_counts",
    "load_env_map",
    "load_examples",
    "load_image",
    "read_examples",
    "to_rgb",
]
