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
from typing import Any, TypeVar, get_args, overload

import yaml
from pydantic import BaseModel, ValidationError

from robustvlm.config.endpoints import SECRET_FIELDS, JudgeConfig
from robustvlm.config.run import RunConfig
from robustvlm.errors import ConfigError
from robustvlm.redact import redact

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
