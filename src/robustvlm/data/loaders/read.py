"""Read a dataset into `Example`s: the stream of raw records of any format, converted, given
their environment and checked (`load_examples`, `read_examples`, `raw_records`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from robustvlm.data.environments import EnvMap, format_env_counts, load_env_map
from robustvlm.data.images import load_image
from robustvlm.data.loaders.checks import check_new_id, check_text, env_label, with_env
from robustvlm.data.loaders.convert import examples_of
from robustvlm.data.loaders.formats import DATA_FORMATS, detect_format, format_choices
from robustvlm.data.loaders.hub import hub_rows
from robustvlm.data.loaders.options import HubSelection, LoadOptions
from robustvlm.data.loaders.raw import RawRecord
from robustvlm.data.records import SPLITS, Example, SkipLog, bad_record_handler
from robustvlm.errors import ConfigError, DataError
from robustvlm.hub_dataset import HubDataset


def load_examples(
    path: str | Path,
    options: LoadOptions | None = None,
    *,
    on_bad_record: str = "error",
    skip_log: SkipLog | None = None,
    verbose: bool = True,
    **fields: Any,
) -> list[Example]:
    """Read a dataset into Examples, in file order.

    Args:
        path: a data file (`.jsonl`, `.json`, `.parquet`), a directory (holding `data.jsonl`, a
            saved HF dataset, parquet files, or images as `ROOT/DOMAIN/CLASS/*.png|jpg|jpeg`),
            or `hf:NAME[:CONFIG]` for `datasets.load_dataset` (needs a network).
        options: how to read it (`LoadOptions`; default its defaults); keyword arguments named
            as its fields replace those fields (`load_examples(path, fmt="folder")`).
        on_bad_record: "error" raises the first DataError; "skip" drops bad records and counts
            each in `skip_log`. A file that cannot be read at all, or holds no record, always raises.
        verbose: print the per-environment counts table (and the number skipped).
    """
    on_error, log = bad_record_handler(on_bad_record, skip_log)
    already_skipped = len(log)
    examples = read_examples(path, on_error, replace(options or LoadOptions(), **fields))
    if verbose:
        print(format_env_counts(examples))
        if len(log) > already_skipped:
            print(f"skipped {len(log) - already_skipped} bad record(s)")
    return examples


def read_examples(
    path: str | Path, on_error: Callable[[DataError], None], options: LoadOptions | None = None
) -> list[Example]:
    """`load_examples` without printing: every bad record is passed to `on_error` and dropped."""
    opts = options or LoadOptions()
    mapping = _checked_env_map(path, opts)
    examples: list[Example] = []
    first_seen: dict[str, str] = {}
    n_rows = 0
    for row in _rows(path, opts):
        n_rows += 1
        try:
            record = _readable(row)
            label, candidates = env_label(record.data, opts.env_column), examples_of(record)
        except DataError as error:
            on_error(error)
            continue
        for candidate in candidates:
            try:
                ex = _checked_example(candidate, label, mapping, opts, record, first_seen)
            except DataError as error:
                on_error(error)
                continue
            if ex is not None:
                first_seen[ex.id] = ex.source
                examples.append(ex)
    if n_rows == 0:
        raise DataError("holds no records (the file is empty)", str(path))
    return examples


def _checked_env_map(path: str | Path, opts: LoadOptions) -> EnvMap | None:
    """Check `opts` (format, split, hub selection) for `path` and read its env map, if any.
    Raises ConfigError on the first problem."""
    if opts.fmt != "auto" and opts.fmt not in DATA_FORMATS:
        raise ConfigError(f"unknown data format {opts.fmt!r}; expected one of {format_choices(', ')}")
    if opts.split is not None and opts.split not in SPLITS:
        raise ConfigError(f"unknown split {opts.split!r}; expected one of {', '.join(SPLITS)}")
    mapping = load_env_map(opts.env_map) if opts.env_map is not None else None
    if opts.hub is not None and HubDataset.parse(path) is None:
        raise ConfigError(f"{path}: hub subsets and row sampling apply only to hf:NAME datasets")
    return mapping


def _readable(row: RawRecord | DataError) -> RawRecord:
    """The raw record a reader gave, or its DataError (a line it could not read) raised."""
    if isinstance(row, DataError):
        raise row
    return row


def _checked_example(
    ex: Example, label: str | None, mapping: EnvMap | None, opts: LoadOptions, row: RawRecord,
    first_seen: Mapping[str, str],
) -> Example | None:
    """`ex` with its environment, after the text, image and id checks (DataError); None when it
    is of another split than `opts.split`."""
    ex = with_env(ex, label, mapping, opts.task_rules, opts.env_column, row)
    check_text(ex, row)
    if opts.split is not None and ex.split != opts.split:
        return None
    if opts.validate_images and ex.image is not None:
        load_image(ex.image, **row.where(ex.id), max_pixels=opts.max_pixels)
    check_new_id(first_seen, ex.id, row)
    return ex


def _rows(path: str | Path, options: LoadOptions) -> Iterator[RawRecord | DataError]:
    """Raw records of any format, relative image paths taken from `options.image_root` when
    given (checked now, before any is read); unreadable lines come as DataErrors, unreadable
    files raise."""
    rows = _located_rows(path, options, _image_root_dir(options.image_root))
    return _outside_root_allowed(rows) if options.allow_outside_root else rows


def _outside_root_allowed(rows: Iterator[RawRecord | DataError]) -> Iterator[RawRecord | DataError]:
    """The rows with `allow_outside_root` set (see `LoadOptions`)."""
    for row in rows:
        yield replace(row, allow_outside_root=True) if isinstance(row, RawRecord) else row


def _located_rows(
    path: str | Path, options: LoadOptions, image_root: Path | None
) -> Iterator[RawRecord | DataError]:
    """`_rows` before the outside-root allowance."""
    dataset = HubDataset.parse(path)
    if dataset is not None:
        rows: Iterator[RawRecord | DataError] = hub_rows(dataset, options.split, options.hub or HubSelection())
    else:
        path = Path(path)
        if not path.exists():
            raise DataError("data file or directory not found", str(path))
        data_format = detect_format(path) if options.fmt == "auto" else DATA_FORMATS[options.fmt]
        if not data_format.record_file and image_root is not None:
            raise ConfigError(f"{path}: an image root applies to record files, not to an image "
                              "folder (ROOT/DOMAIN/CLASS/*.png), whose images are under ROOT")
        rows = data_format.read(path, options)
    yield from rows if image_root is None else _rooted(rows, image_root)


def raw_records(
    path: str | Path,
    *,
    split: str | None = None,
    hub: HubSelection | None = None,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
) -> Iterator[RawRecord | DataError]:
    """The raw records (dicts with their location) of a record file: JSONL, JSON, parquet, a saved
    HF dataset or `hf:NAME[:CONFIG]` (its `split`, default train), the file type told from the
    path; for readers of other record kinds (preference pairs). Unreadable lines come as
    DataErrors, unreadable files raise; image folders are refused."""
    if HubDataset.parse(path) is None and Path(path).is_dir():
        if not detect_format(Path(path)).record_file:
            raise DataError("expected a record file (JSONL, JSON, parquet or a saved dataset), "
                            "not an image folder", str(path))
    options = LoadOptions(split=split, hub=hub, image_root=image_root, allow_outside_root=allow_outside_root)
    return _rows(path, options)


def _image_root_dir(image_root: str | Path | None) -> Path | None:
    """`image_root` as a Path (None stays None); ConfigError unless it is a directory."""
    if image_root is None:
        return None
    root = Path(image_root)
    if not root.is_dir():
        problem = "is not a directory" if root.exists() else "not found"
        raise ConfigError(f"image root {root}: {problem}")
    return root


def _rooted(rows: Iterator[RawRecord | DataError], image_root: Path) -> Iterator[RawRecord | DataError]:
    """The rows with relative image paths taken from `image_root`."""
    for row in rows:
        yield replace(row, base_dir=image_root) if isinstance(row, RawRecord) else row
