"""The JSON reader: a list of records (LLaVA's JSON, Multimodal RewardBench 2's `{"pairs": [...]}`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from robustvlm.data.loaders.raw import RawRecord, record_position
from robustvlm.errors import DataError


def json_rows(path: Path) -> Iterator[RawRecord]:
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read data file ({exc.strerror})", file) from exc
    try:
        records = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise DataError("not valid UTF-8 text", file, raw[: exc.start].count(b"\n") + 1) from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON ({exc.msg}, column {exc.colno})", file, exc.lineno) from exc
    if isinstance(records, dict) and set(records) == {"pairs"} and isinstance(records["pairs"], list):
        records = records["pairs"]  # Multimodal RewardBench 2's <task>.json: {"pairs": [...]}
    if not isinstance(records, list):
        raise DataError("expected a JSON list of records (or an object whose only key, \"pairs\", holds one)", file)
    for index, record in enumerate(records):
        yield RawRecord(record, file, record_position(record, index), path.parent)
