"""The data format registry: each format's reader and how auto-detection recognises it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from robustvlm.data.loaders.folder import folder_rows
from robustvlm.data.loaders.hub import is_saved_dataset, saved_dataset_rows
from robustvlm.data.loaders.json_list import json_rows
from robustvlm.data.loaders.jsonl import jsonl_rows
from robustvlm.data.loaders.options import LoadOptions
from robustvlm.data.loaders.parquet import parquet_rows
from robustvlm.data.loaders.raw import RawRecord
from robustvlm.errors import DataError


@dataclass(frozen=True)
class DataFormat:
    """A data format: its reader and how auto-detection recognises it.

    Attributes:
        read: (existing path, options) -> its raw records; unreadable lines come as DataErrors,
            unreadable files raise.
        detect: whether an existing path is of this format (None: only when named); "auto"
            takes the first format of DATA_FORMATS that claims the path.
        record_file: a file of records (an image root applies); False for image folders.
    """

    read: Callable[[Path, LoadOptions], Iterator[RawRecord | DataError]]
    detect: Callable[[Path], bool] | None
    record_file: bool = True


def _is_suffix(path: Path, suffix: str) -> bool:
    return not path.is_dir() and path.suffix.lower() == suffix


#: Every data format by name, in the order auto-detection tries them (`LoadOptions.fmt`, `data
#: check --format`): adding a format is one entry here and one reader.
DATA_FORMATS: dict[str, DataFormat] = {
    "jsonl": DataFormat(
        read=lambda path, _: jsonl_rows(path / "data.jsonl" if path.is_dir() else path),
        detect=lambda path: _is_suffix(path, ".jsonl") or (path.is_dir() and (path / "data.jsonl").is_file()),
    ),
    "json": DataFormat(read=lambda path, _: json_rows(path), detect=lambda path: _is_suffix(path, ".json")),
    "llava": DataFormat(read=lambda path, _: json_rows(path), detect=None),  # LLaVA's JSON: "json"'s reader
    "parquet": DataFormat(
        read=lambda path, _: parquet_rows(path),
        detect=lambda path: _is_suffix(path, ".parquet")
        or (path.is_dir() and not is_saved_dataset(path) and any(path.rglob("*.parquet"))),
    ),
    "hf": DataFormat(read=lambda path, _: saved_dataset_rows(path), detect=is_saved_dataset),
    "folder": DataFormat(
        read=lambda path, options: folder_rows(path, options.instruction_template),
        detect=Path.is_dir,
        record_file=False,
    ),
}


def format_choices(separator: str = "|") -> str:
    """"auto" and every format name, joined by `separator` (the `--format` help)."""
    return separator.join(["auto", *DATA_FORMATS])


def detect_format(path: Path) -> DataFormat:
    """The first format of DATA_FORMATS whose detector claims the existing `path`."""
    for data_format in DATA_FORMATS.values():
        if data_format.detect is not None and data_format.detect(path):
            return data_format
    raise DataError("cannot tell the data format from the name; pass fmt=", str(path))
