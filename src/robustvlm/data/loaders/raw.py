"""A raw record (a dict as a reader found it) and where it came from, for error messages."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from robustvlm.errors import DataError


class Where(TypedDict):
    """DataError's (and load_image's) `source`, `record` and `record_id` for one row."""

    source: str
    record: str | int | None
    record_id: str | None


@dataclass
class RawRecord:
    """One raw record and where it came from."""

    data: object
    file: str
    ref: int | str  # the 1-based line number, or the record id / position
    base_dir: Path | None  # relative image paths are taken from here, and must stay inside it
    allow_outside_root: bool = False  # the user allowed image paths that leave base_dir

    def where(self, example_id: str | None = None) -> Where:
        """DataError's `source`, `record` and `record_id` for this row (or one of its examples):
        the line number and the example's (else the record's) id, or without a line the id alone."""
        if isinstance(self.ref, int):
            return {"source": self.file, "record": self.ref, "record_id": example_id or self._record_id()}
        return {"source": self.file, "record": example_id or self.ref, "record_id": None}

    def error(self, message: str, example_id: str | None = None) -> DataError:
        """A DataError about this row (or one of its examples) saying where it is."""
        return DataError(message, **self.where(example_id))

    def _record_id(self) -> str | None:
        """The record's `id` field, when it has one."""
        value = self.data.get("id") if isinstance(self.data, dict) else None
        return None if value in (None, "") else str(value)

    @property
    def location(self) -> str:
        return f"{self.file}:{self.ref}" if isinstance(self.ref, int) else self.file


def record_position(record: object, index: int) -> str:
    """How errors name a record without a line number: its id, else its position."""
    if isinstance(record, dict) and record.get("id") not in (None, ""):
        return str(record["id"])
    return f"record {index + 1}"
