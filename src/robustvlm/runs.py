"""Run folders: how every command claims its output folder, and the JSONL rows it appends there.

A run folder holds `config.resolved.yaml`, every setting of the run with defaults filled in.
`claim_run_folder` gives `--resume` one meaning in every command:

- without resume, a folder that already holds a run (its `config.resolved.yaml`) is refused,
  so finished work is never overwritten by accident;
- with resume, the stored settings must equal the new ones (keys allowed to differ, such as a
  batch size that changes no result, are named by the command); the error names every key that
  differs. A folder with files but no stored settings is refused: what made them is unknown.

Per-row outputs (predictions, per-question scores, training logs) are JSONL files written one
row at a time as work finishes. `read_jsonl` reads them back to resume: a torn last line (a
killed run: no newline, not valid JSON) is dropped and the file rewritten without it, while any
other unreadable line is damage and raises a DataError naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import BaseModel

from robustvlm.errors import ConfigError, DataError

CONFIG_FILE = "config.resolved.yaml"


def resolved_settings(settings: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe dict of a pydantic config (every default filled in) or of a plain mapping."""
    if isinstance(settings, BaseModel):
        return settings.model_dump(mode="json")
    return json.loads(json.dumps(dict(settings)))


def write_settings(settings: BaseModel | Mapping[str, Any], path: str | Path) -> None:
    """Write resolved settings as YAML (keys in definition order)."""
    Path(path).write_text(
        yaml.safe_dump(resolved_settings(settings), sort_keys=False), encoding="utf-8"
    )


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
        if a.get(key) != b.get(key)
        and not any(key == p or key.startswith(p + ".") for p in allowed)
    )


def claim_run_folder(
    path: str | Path,
    settings: BaseModel | Mapping[str, Any],
    *,
    resume: bool,
    may_differ: Collection[str] = (),
    write: bool = True,
) -> Path:
    """Make `path` the folder of a run with `settings`, or raise ConfigError (see module doc).

    Args:
        path: the output folder (created).
        settings: the run's resolved settings (a pydantic config or a JSON-safe mapping).
        resume: continue the run the folder holds.
        may_differ: dotted keys that may change between the stored and the new settings.
        write: write `config.resolved.yaml` (False on the non-main processes of a distributed
            run, which only check).

    Returns:
        the folder as a Path.
    """
    folder = Path(path)
    stored_path = folder / CONFIG_FILE
    now = resolved_settings(settings)
    if stored_path.is_file():
        if not resume:
            raise ConfigError(
                f"{folder} already holds a run ({CONFIG_FILE}): pass --resume to continue it, or "
                "choose another --out"
            )
        saved = yaml.safe_load(stored_path.read_text(encoding="utf-8")) or {}
        keys = differing_keys(saved, now, may_differ)
        if keys:
            before, after = flatten_settings(saved), flatten_settings(now)
            raise ConfigError(
                f"cannot resume into {folder}: its {CONFIG_FILE} differs in {keys} (saved "
                f"{[before.get(k) for k in keys]}, now {[after.get(k) for k in keys]}); use the "
                "same settings, or a new --out"
            )
    elif resume and folder.is_dir() and any(folder.iterdir()):
        raise ConfigError(
            f"cannot resume into {folder}: it holds files but no {CONFIG_FILE}, so the settings "
            "they were made with are unknown; use another --out"
        )
    if write:
        folder.mkdir(parents=True, exist_ok=True)
        write_settings(now, stored_path)
    return folder


# ---------------------------------------------------------------- JSONL rows


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file a run appends to ([] when there is none yet); see the module doc."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    complete, last = lines[:-1], lines[-1]  # `last` is "" when the file ends with a newline
    rows = []
    for number, line in enumerate(complete, start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"line {number} is not valid JSON ({exc})", str(path), number) from exc
    if last.strip():
        try:
            rows.append(json.loads(last))
        except json.JSONDecodeError:
            pass  # torn by an interrupted write
        write_jsonl(path, rows)
    return rows


def append_jsonl(handle: IO[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Append rows to an open JSONL file and flush, so a kill loses at most the row in flight."""
    for row in rows:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    handle.flush()


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace a JSONL file atomically (written to a temporary name, then renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    tmp.replace(path)
