"""Training objectives: one class per method, one registry."""

from __future__ import annotations

from typing import Any

from robustvlm.errors import ConfigError
from robustvlm.objectives.base import (
    EVERY_EXPERIMENT,
    INVARIANCE,
    LADDER,
    TASKS,
    HParam,
    LossParts,
    Objective,
)
from robustvlm.objectives.birm import BIRM
from robustvlm.objectives.dynamic_birm import DynamicBIRM
from robustvlm.objectives.erm import ERM
from robustvlm.objectives.groupdro import GroupDRO
from robustvlm.objectives.irm import IRM
from robustvlm.objectives.vrex import VREx
from robustvlm.plugins import load_plugins

REGISTRY: dict[str, type[Objective]] = {
    cls.name: cls for cls in (ERM, IRM, VREx, GroupDRO, BIRM, DynamicBIRM)
}


def build_objective(method: str, env_names: list[str], hparams: dict[str, Any] | None = None) -> Objective:
    """Instantiate the objective registered as `method` for these training environments."""
    if method not in REGISTRY:
        load_plugins()
    if method not in REGISTRY:
        raise ValueError(f"unknown method '{method}'; choose one of {sorted(REGISTRY)}")
    return REGISTRY[method](env_names, **(hparams or {}))


def applicable_methods(experiment: str) -> tuple[str, ...]:
    """The registered objectives (plugins' too) that declare they apply to `experiment`
    (`Objective.applies_to`), in registry order: that experiment's default method list."""
    load_plugins()
    return tuple(name for name, cls in REGISTRY.items() if experiment in cls.applies_to)


def check_method(method: str, hparams: dict[str, Any], where: str = "method") -> None:
    """ConfigError naming `where` unless `method` is registered and `hparams` are values it
    accepts: declared keys of the right kinds (`check_hparam_values`), and whatever the class
    itself checks when built. Run when a config is read, before any run starts."""
    if method not in REGISTRY:
        load_plugins()
    if method not in REGISTRY:
        raise ConfigError(f"{where}: unknown method {method!r}; choose one of {sorted(REGISTRY)}")
    try:
        REGISTRY[method](["env0", "env1"], **hparams)  # the class's own checks, on stand-in envs
    except (ConfigError, ValueError, TypeError) as err:
        raise ConfigError(f"{where}: {err}") from None


__all__ = [
    "EVERY_EXPERIMENT", "INVARIANCE", "LADDER", "REGISTRY", "TASKS", "HParam", "LossParts", "Objective",
    "applicable_methods", "build_objective", "check_method",
]
