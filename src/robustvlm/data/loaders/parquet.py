"""The parquet reader: a parquet file, or every parquet file under a folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from robustvlm.data.loaders.raw import RawRecord, record_position
from robustvlm.errors import DataError


def parquet_rows(path: Path) -> Iterator[RawRecord]:
    import pyarrow.parquet as pq

    for file in sorted(path.rglob("*.parquet")) if path.is_dir() else [path]:
        try:
            index = 0
            for batch in pq.ParquetFile(file).iter_batches(batch_size=256):
                for record in batch.to_pylist():
                    yield RawRecord(record, str(file), record_position(record, index), file.parent)
                    index += 1
        except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
            raise DataError(f"cannot read parquet file ({exc})", str(file)) from exc
