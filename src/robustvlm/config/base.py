"""The base of every config section: unknown keys, NaN / infinities and booleans for numbers refused."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, model_validator


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
