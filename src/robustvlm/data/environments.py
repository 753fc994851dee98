"""Environments: which environment a record belongs to, and how many records each one holds.

An environment comes from one of three places (see `load_examples`):

- a column of the record (`env_column`, default `env` then `data_source`);
- an env map (YAML file or dict) from source names to environments, some marked OOD::

      environments:
        general: {sources: [coco, vqav2]}
        reasoning: {sources: [geo170k]}
        ocr: {sources: [textocr, st_vqa], ood: true}

  An environment may also list record ids (`ids: [...]`, what `robustvlm envs infer` writes);
  a record listed by id goes there, whatever its source;

- task-type keyword rules on the instruction (`assign_task_type`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from robustvlm.config import load_yaml, yaml_problem
from robustvlm.data.records import SPLITS, EnvRecord
from robustvlm.errors import ConfigError

TASK_TYPES = ("general", "reasoning", "doc-chart", "ocr")

# Task-type rules, checked in this order; the first rule with a keyword in the instruction wins
# and an instruction matching none is "general". Documents, charts and screens come first (their
# questions often mention text too), then scene text (OCR), then math/reasoning. Keywords match whole words, case-insensitive,
# with an optional plural "s" (so "chart" matches "Charts" but not "charter").
TASK_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("doc-chart", ("chart", "graph", "plot", "table", "document", "infographic", "screenshot",
                   "screen", "webpage", "slide", "form", "receipt", "invoice", "axis", "legend")),
    ("ocr", ("ocr", "text", "written", "transcribe", "handwritten", "handwriting", "spell",
             "license plate")),
    ("reasoning", ("solve", "calculate", "compute", "equation", "math", "geometry", "angle",
                   "triangle", "area", "perimeter", "radius", "value of x", "step by step",
                   "prove", "deduce")),
)

_TASK_PATTERNS = tuple(
    (task, re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")s?\b", re.IGNORECASE))
    for task, words in TASK_RULES
)


def assign_task_type(instruction: str) -> str:
    """The task type of an instruction: "doc-chart", "ocr", "reasoning" or "general" (TASK_RULES)."""
    for task, pattern in _TASK_PATTERNS:
        if pattern.search(instruction):
            return task
    return "general"


@dataclass(frozen=True)
class EnvMap:
    """Source names (and record ids) mapped to environments; `ood` holds the environments held
    out of training."""

    env_of: dict[str, str]
    ood: frozenset[str]
    env_of_id: dict[str, str] = field(default_factory=dict)


def _read_env_map_file(path: str | Path) -> object:
    """The parsed YAML of an env map file. Raises ConfigError naming the file."""
    try:
        return load_yaml(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: cannot read env map: {yaml_problem(exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read env map: {exc}") from exc


def _env_entry_names(where: str, env: object, entry: Mapping) -> tuple[list[str], list[str]]:
    """An environment's `sources` and `ids` lists, after checking the entry's keys and types."""
    sources, ids = entry.get("sources", []), entry.get("ids", [])
    for key, names in (("sources", sources), ("ids", ids)):
        if not isinstance(names, list) or not all(isinstance(s, str) for s in names):
            raise ConfigError(f"{where}: environments.{env}.{key} must be a list of names")
    if not sources and not ids:
        raise ConfigError(f"{where}: environments.{env} needs a non-empty list of sources (or ids)")
    unknown = set(entry) - {"sources", "ids", "ood"}
    if unknown:
        raise ConfigError(f"{where}: environments.{env}: unknown key(s) {sorted(unknown)}")
    if not isinstance(entry.get("ood", False), bool):
        raise ConfigError(f"{where}: environments.{env}.ood must be true or false")
    return sources, ids


def _assign(where: str, what: str, names: list[str], env: object, env_of: dict[str, str]) -> None:
    """Put each name (a source or a record id) into `env`; one already in another is an error."""
    for name in names:
        if name in env_of and env_of[name] != env:
            raise ConfigError(f"{where}: {what} {name!r} is in both {env_of[name]!r} and {env!r}")
        env_of[name] = str(env)


def load_env_map(spec: str | Path | Mapping) -> EnvMap:
    """Read an env map from a YAML file or an already-parsed dict. Raises ConfigError."""
    where = "env map" if isinstance(spec, Mapping) else str(spec)
    data = spec if isinstance(spec, Mapping) else _read_env_map_file(spec)
    envs = data.get("environments") if isinstance(data, Mapping) else None
    if not isinstance(envs, Mapping) or not envs:
        raise ConfigError(f"{where}: expected a non-empty mapping under 'environments'")
    env_of: dict[str, str] = {}
    env_of_id: dict[str, str] = {}
    ood: set[str] = set()
    for env, entry in envs.items():
        entry = entry if isinstance(entry, Mapping) else {}
        sources, ids = _env_entry_names(where, env, entry)
        _assign(where, "source", sources, env, env_of)
        _assign(where, "record", ids, env, env_of_id)
        if entry.get("ood", False):
            ood.add(str(env))
    return EnvMap(env_of=env_of, ood=frozenset(ood), env_of_id=env_of_id)


COUNT_COLUMNS = (*SPLITS, "ood", "total")


def env_counts(examples: Iterable[EnvRecord]) -> dict[str, dict[str, int]]:
    """Per environment (sorted by name): examples per split, OOD examples, and the total."""
    counts: dict[str, dict[str, int]] = {}
    for ex in examples:
        row = counts.setdefault(ex.env, dict.fromkeys(COUNT_COLUMNS, 0))
        row[ex.split] = row.get(ex.split, 0) + 1
        row["ood"] += int(ex.ood)
        row["total"] += 1
    return dict(sorted(counts.items()))


def format_env_counts(examples: Iterable[EnvRecord]) -> str:
    """`env_counts` as an aligned text table with a total row."""
    counts = env_counts(examples)
    if not counts:
        return "no examples"
    total = {col: sum(row[col] for row in counts.values()) for col in COUNT_COLUMNS}
    rows = [["env", *COUNT_COLUMNS]]
    rows += [[env, *(str(row[col]) for col in COUNT_COLUMNS)] for env, row in counts.items()]
    rows.append(["total", *(str(total[col]) for col in COUNT_COLUMNS)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
        for r in rows
    )
