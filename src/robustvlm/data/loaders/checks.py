"""An Example's environment, and the checks every record passes (text, unique id)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from robustvlm.data.environments import EnvMap, assign_task_type
from robustvlm.data.loaders.raw import RawRecord
from robustvlm.data.records import Example


def env_label(data: object, env_column: str | None) -> str | None:
    """The record's environment name: `env_column`, else `env`, else `data_source`."""
    if not isinstance(data, dict):
        return None
    value = data.get(env_column) if env_column else (data.get("env") or data.get("data_source"))
    return None if value is None or value == "" else str(value)


def with_env(ex: Example, label: str | None, env_map: EnvMap | None, task_rules: bool,
              env_column: str | None, row: RawRecord) -> Example:
    if task_rules:
        label = assign_task_type(ex.instruction)
    if label is None:
        field = repr(env_column) if env_column else "'env' or 'data_source'"
        raise row.error(f"missing environment (no {field} field)", ex.id)
    if env_map is None:
        return replace(ex, env=label)
    env = env_map.env_of_id.get(ex.id) or env_map.env_of.get(label)
    if env is None:
        raise row.error(f"environment source {label!r} is not in the env map", ex.id)
    if env in env_map.ood:
        return replace(ex, env=env, ood=True, split="test")
    return replace(ex, env=env)


def check_text(ex: Example, row: RawRecord) -> None:
    if not ex.instruction.strip():
        raise row.error("empty instruction", ex.id)
    if not ex.target.strip():
        raise row.error("empty target", ex.id)


def check_new_id(seen: Mapping[str, str], record_id: str, row: RawRecord) -> None:
    """Raise a DataError about `row` when `record_id` was read before (`seen`: id -> where)."""
    if record_id in seen:
        raise row.error(f"duplicate id {record_id!r} (first at {seen[record_id]})", record_id)
