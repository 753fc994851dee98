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
from robustvlm.data.loaders import (
    DATA_FORMATS,
    LoadOptions,
    format_choices,
    load_examples,
    read_examples,
)
from robustvlm.data.records import SPLITS, Example, SkipLog

__all__ = [
    "DATA_FORMATS",
    "DEFAULT_MAX_PIXELS",
    "SPLITS",
    "TASK_RULES",
    "TASK_TYPES",
    "CheckReport",
    "EnvMap",
    "Example",
    "LoadOptions",
    "SkipLog",
    "assign_task_type",
    "check_dataset",
    "env_counts",
    "format_choices",
    "format_env_counts",
    "load_env_map",
    "load_examples",
    "load_image",
    "read_examples",
    "to_rgb",
]


def __getattr__(name: str) -> object:
    """`FORMATS`, the old name of the data format names ("auto" and DATA_FORMATS' keys), still
    answers for one release, with a FutureWarning."""
    if name == "FORMATS":
        import warnings

        warnings.warn("robustvlm.data.FORMATS is now DATA_FORMATS (a registry: name -> DataFormat); "
                      "FORMATS goes in the next release", FutureWarning, stacklevel=2)
        return tuple(format_choices().split("|"))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
