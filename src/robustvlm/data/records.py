"""The one record type for instruction data, and the log of skipped records."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import Field, asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from robustvlm.errors import ConfigError, DataError

SPLITS = ("train", "test", "val")


class EnvRecord(Protocol):
    """What environment counts and carving read of a record: an `Example` or a preference pair
    (any dataclass with these fields)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def id(self) -> str: ...
    @property
    def env(self) -> str: ...
    @property
    def split(self) -> str: ...
    @property
    def ood(self) -> bool: ...


@dataclass
class Example:
    """One instruction-following example.

    Attributes:
        id: unique id within the dataset.
        image: an absolute image path, the encoded bytes of an image file, or None (text-only).
        instruction: the user's question or instruction (no image placeholder).
        target: the reference answer.
        env: environment name (task type, domain, source...).
        split: "train", "val" or "test".
        ood: True when the environment is held out of training (out-of-domain).
        source: file (and line) the record came from, for error messages.
    """

    id: str
    image: str | bytes | None
    instruction: str
    target: str
    env: str
    split: str = "train"
    ood: bool = False
    source: str = ""

    def to_json(self) -> dict:
        """A JSON-safe dict (image bytes are not inlined)."""
        d = asdict(self)
        if isinstance(self.image, bytes):
            d["image"] = f"<{len(self.image)} bytes>"
        return d


@dataclass
class SkipLog:
    """Records skipped under `on_bad_record: skip`; written to the run's `skipped.jsonl`."""

    rows: list[dict] = field(default_factory=list)

    def add(self, error: DataError) -> None:
        row = {"source": error.source, "record": error.record, "reason": error.message}
        if error.record_id is not None:
            row["id"] = error.record_id
        self.rows.append(row)

    def __len__(self) -> int:
        return len(self.rows)

    def write(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as f:
            for row in self.rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def bad_record_handler(on_bad_record: str, skip_log: SkipLog | None) -> tuple[Callable[[DataError], None], SkipLog]:
    """(on_error, log) for a reader: on_error raises the first bad record (`on_bad_record`
    "error") or counts each in the log ("skip"); the log is `skip_log` or a new one."""
    if on_bad_record not in ("error", "skip"):
        raise ConfigError(f"on_bad_record must be 'error' or 'skip', not {on_bad_record!r}")
    log = skip_log if skip_log is not None else SkipLog()

    def on_error(error: DataError) -> None:
        if on_bad_record == "error":
            raise error
        log.add(error)

    return on_error, log
