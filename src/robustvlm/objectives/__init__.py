"""Training objectives: one class per method, one registry."""

from __future__ import annotations

from typing import Any

from robustvlm.objectives.base import HParam, LossParts, Objective
from robustvlm.objectives.birm import BIRM
from robustvlm.objectives.dynamic_birm import DynamicBIRM
from robustvlm.objectives.erm import ERM
from robustvlm.objectives.groupdro import GroupDRO
from robustvlm.objectives.irm import IRM
from robustvlm.objectives.vrex import VREx

REGISTRY: dict[str, type[Objective]] = {
    cls.name: cls for cls in (ERM, IRM, VREx, GroupDRO, BIRM, DynamicBIRM)
}


def build_objective(method: str, env_names: list[str], hparams: dict[str, Any] | None = None) -> Objective:
    """Instantiate the objective registered as `method` for these training environments."""
    if method not in REGISTRY:
        raise ValueError(f"unknown method '{method}'; choose one of {sorted(REGISTRY)}")
    return REGISTRY[method](env_names, **(hparams or {}))


__all__ = ["REGISTRY", "HParam", "LossParts", "Objective", "build_objective"]
