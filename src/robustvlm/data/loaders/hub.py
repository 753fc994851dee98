"""Hugging Face datasets: `hf:NAME[:CONFIG]` (a `hub_dataset.HubDataset`) from the hub, and folders written by `save_to_disk`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.data.loaders.options import HubSelection
from robustvlm.data.loaders.raw import RawRecord, record_position
from robustvlm.errors import ConfigError, DataError, MissingDataSource
from robustvlm.hub_dataset import HubDataset
from robustvlm.redact import refuse_key_like

if TYPE_CHECKING:
    import datasets

_HF_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


def hub_rows(dataset: HubDataset, split: str | None, hub: HubSelection) -> Iterator[RawRecord]:
    """`dataset` (or its configs `hub.subsets`) through `datasets.load_dataset`."""
    import datasets

    refuse_key_like(dataset.name, "dataset name", "hf:ORG/NAME or a local file")  # a pasted key is never sent
    if hub.subsets and dataset.config:
        raise ConfigError(f"{dataset}: give the hub config in the path or as subsets, not both")
    hf_split = {"val": "validation"}.get(split, split) if split else "train"
    for subset in hub.subsets or (dataset.config,):
        source = str(dataset.with_config(subset))
        try:
            loaded = datasets.load_dataset(dataset.name, subset, split=hf_split)
        except Exception as exc:  # network, missing dataset or config, ...: no bad record, the whole source
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise MissingDataSource(f"{source}: cannot load the dataset ({type(exc).__name__}: {first}); check "
                                    "its name, the network (or HTTPS_PROXY), or give a local copy") from exc
        if hub.max_rows is not None and len(loaded) > hub.max_rows:
            loaded = loaded.shuffle(seed=hub.seed).select(range(hub.max_rows))
        rows = _dataset_rows(loaded, source, hf_split)
        yield from rows if subset is None else _tagged(rows, subset)


def _tagged(rows: Iterator[RawRecord], subset: str) -> Iterator[RawRecord]:
    """The rows with `subset` set (where the record has no such field), for env assignment."""
    for row in rows:
        if isinstance(row.data, dict):
            row.data.setdefault("subset", subset)
        yield row


def saved_dataset_rows(path: Path) -> Iterator[RawRecord]:
    """A directory written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # datasets raises FileNotFoundError, ValueError, ...
        raise DataError(f"cannot load saved dataset ({exc})", str(path)) from exc
    if isinstance(loaded, datasets.DatasetDict):
        for split_name, dataset in loaded.items():
            yield from _dataset_rows(dataset, str(path), split_name)
    else:
        yield from _dataset_rows(loaded, str(path), str(loaded.split or "train"))


def _dataset_rows(dataset: datasets.Dataset, source: str, split_name: str) -> Iterator[RawRecord]:
    """Rows of one `datasets.Dataset`; images stay encoded (the Image feature is not decoded)."""
    import datasets

    if isinstance(dataset.features.get("image"), datasets.Image):
        dataset = dataset.cast_column("image", datasets.Image(decode=False))
    for index, record in enumerate(dataset):
        record.setdefault("split", split_name)
        yield RawRecord(record, source, record_position(record, index), None)


def is_saved_dataset(path: Path) -> bool:
    return path.is_dir() and any((path / marker).is_file() for marker in _HF_MARKERS)
