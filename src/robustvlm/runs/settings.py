"""A run's resolved settings: written as `config.resolved.yaml` under a line naming its command,
and compared key by key on `--resume` (two spellings of one existing path are one setting)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from robustvlm.redact import redact_settings


def resolved_settings(settings: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe dict of a pydantic config (every default filled in) or of a plain mapping,
    redacted (`redact.redact_settings`): what may be written or sent to a tracker."""
    if isinstance(settings, BaseModel):
        return redact_settings(settings.model_dump(mode="json"))
    return redact_settings(json.loads(json.dumps(dict(settings))))


def write_settings(
    settings: BaseModel | Mapping[str, Any], path: str | Path, command: str | None = None
) -> None:
    """Write resolved settings as YAML (keys in definition order); `command`, the robustvlm
    command whose run folder this is, goes in a first comment line (see `stored_command`)."""
    header = f"# robustvlm {command} run: every setting, defaults filled in\n" if command else ""
    Path(path).write_text(
        header + yaml.safe_dump(resolved_settings(settings), sort_keys=False), encoding="utf-8"
    )


def stored_command(path: Path) -> str | None:
    """The command named in the first line of a `config.resolved.yaml` (None when absent)."""
    with path.open(encoding="utf-8") as handle:
        found = re.match(r"# robustvlm (.+?) run\b", handle.readline())
    return found[1] if found else None


def flatten_settings(value: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted key: leaf value} of nested mappings (lists are leaves)."""
    if not isinstance(value, Mapping) or not value:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, child in value.items():
        out.update(flatten_settings(child, f"{prefix}.{key}" if prefix else str(key)))
    return out


def differing_keys(
    saved: Mapping[str, Any], now: Mapping[str, Any], may_differ: Collection[str] = ()
) -> list[str]:
    """Sorted dotted keys whose values differ; a key under one of `may_differ` is not compared."""
    a, b = flatten_settings(dict(saved)), flatten_settings(dict(now))
    allowed = tuple(may_differ)
    return sorted(
        key
        for key in set(a) | set(b)
        if not _same_setting(a.get(key), b.get(key))
        and not any(key == p or key.startswith(p + ".") for p in allowed)
    )


def _same_setting(saved: Any, now: Any) -> bool:
    """Equal values, or two spellings (relative / absolute) of one existing path."""
    if saved == now:
        return True
    if not (isinstance(saved, str) and isinstance(now, str)) or "\n" in saved + now:
        return False
    try:
        a, b = Path(saved).expanduser(), Path(now).expanduser()
        return (a.exists() or b.exists()) and a.resolve() == b.resolve()
    except (OSError, ValueError):
        return False
