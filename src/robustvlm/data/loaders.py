"""Load instruction data into `Example`s: JSONL, JSON / LLaVA conversations, parquet, HF datasets
and image-folder domain layouts.

Every format is read as a stream of raw records (dicts) with their location; every record is then
converted, given its environment and checked the same way. A record is either *flat*
(`id, image, instruction, target, env, split, ood`) or a *conversation* (`id, image,
conversations: [{from: human|gpt, value}], data_source`), whose every human/gpt pair becomes one
Example with id `"{id}#{turn}"`.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from PIL import Image

from robustvlm.data.environments import EnvMap, assign_task_type, format_env_counts, load_env_map
from robustvlm.data.images import DEFAULT_MAX_PIXELS, load_image
from robustvlm.data.records import SPLITS, Example, SkipLog, bad_record_handler
from robustvlm.errors import ConfigError, DataError, MissingDataSource
from robustvlm.redact import refuse_key_like

if TYPE_CHECKING:
    import datasets

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
#: Split names some datasets use for ours.
SPLIT_ALIASES = {"validation": "val", "valid": "val", "dev": "val"}
_HF_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


@dataclass(frozen=True)
class LoadOptions:
    """How a dataset is read into Examples (`load_examples`, `read_examples`, `data check`).

    Attributes:
        fmt: a name of DATA_FORMATS, or "auto": the first format whose detector claims the path.
        split: keep only this split ("train", "val", "test"); for `hf:` also the split loaded
            (default "train").
        env_column: the record field naming the environment (default `env`, else `data_source`;
            image folders use the domain directory).
        env_map: YAML file or dict mapping source names to environments (see `environments`);
            records of `ood: true` environments get `ood=True` and split "test".
        task_rules: take the environment from `assign_task_type(instruction)`; with `env_map`
            the task type is the source name looked up in the map.
        instruction_template: the instruction of image-folder records; `{domain}` is replaced.
        validate_images: fully decode every image once (see `load_image`) to find bad ones.
        max_pixels: images with more pixels are bad records.
        hub: for `hf:NAME`, several hub configs (subsets) to load and a seeded row sample of
            each; each record carries its subset name in a `subset` field.
        image_root: the folder relative image paths of record files are taken from (LLaVA's
            `--image_folder`) instead of the data file's folder; not for image folders.
        allow_outside_root: accept image paths (absolute, `../`, symlinks) that resolve outside
            the data root; otherwise each such record is a bad record.
    """

    fmt: str = "auto"
    split: str | None = None
    env_column: str | None = None
    env_map: str | Path | Mapping | None = None
    task_rules: bool = False
    instruction_template: str = "What is shown in this image?"
    validate_images: bool = True
    max_pixels: int = DEFAULT_MAX_PIXELS
    hub: HubSelection | None = None
    image_root: str | Path | None = None
    allow_outside_root: bool = False


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
            label, candidates = _env_label(record.data, opts.env_column), _examples_of(record)
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
    if opts.hub is not None and not (isinstance(path, str) and path.startswith("hf:")):
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
    ex = _with_env(ex, label, mapping, opts.task_rules, opts.env_column, row)
    _check_text(ex, row)
    if opts.split is not None and ex.split != opts.split:
        return None
    if opts.validate_images and ex.image is not None:
        load_image(ex.image, **row.where(ex.id), max_pixels=opts.max_pixels)
    check_new_id(first_seen, ex.id, row)
    return ex


def check_new_id(seen: Mapping[str, str], record_id: str, row: RawRecord) -> None:
    """Raise a DataError about `row` when `record_id` was read before (`seen`: id -> where)."""
    if record_id in seen:
        raise row.error(f"duplicate id {record_id!r} (first at {seen[record_id]})", record_id)


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


# ---------------------------------------------------------------- readers: path -> raw records


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
    if isinstance(path, str) and path.startswith("hf:"):
        rows: Iterator[RawRecord | DataError] = _hub_rows(path, options.split, options.hub or HubSelection())
    else:
        path = Path(path)
        if not path.exists():
            raise DataError("data file or directory not found", str(path))
        data_format = _detect_format(path) if options.fmt == "auto" else DATA_FORMATS[options.fmt]
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
    if not (isinstance(path, str) and path.startswith("hf:")) and Path(path).is_dir():
        if not _detect_format(Path(path)).record_file:
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


def _detect_format(path: Path) -> DataFormat:
    """The first format of DATA_FORMATS whose detector claims the existing `path`."""
    for data_format in DATA_FORMATS.values():
        if data_format.detect is not None and data_format.detect(path):
            return data_format
    raise DataError("cannot tell the data format from the name; pass fmt=", str(path))


def _jsonl_rows(path: Path) -> Iterator[RawRecord | DataError]:
    file = str(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DataError(f"cannot read data file ({exc.strerror})", file) from exc
    with handle:
        for line_no, raw in enumerate(handle, 1):
            try:
                text = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield DataError(f"not valid UTF-8 text (byte {exc.start} of the line)", file, line_no)
                continue
            if not text.strip():
                continue
            try:
                yield RawRecord(json.loads(text), file, line_no, path.parent)
            except json.JSONDecodeError as exc:
                yield DataError(f"invalid JSON ({exc.msg}, column {exc.colno})", file, line_no)


def _json_rows(path: Path) -> Iterator[RawRecord]:
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
        yield RawRecord(record, file, _position(record, index), path.parent)


def _parquet_rows(path: Path) -> Iterator[RawRecord]:
    import pyarrow.parquet as pq

    for file in sorted(path.rglob("*.parquet")) if path.is_dir() else [path]:
        try:
            index = 0
            for batch in pq.ParquetFile(file).iter_batches(batch_size=256):
                for record in batch.to_pylist():
                    yield RawRecord(record, str(file), _position(record, index), file.parent)
                    index += 1
        except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
            raise DataError(f"cannot read parquet file ({exc})", str(file)) from exc


@dataclass(frozen=True)
class HubSelection:
    """What to take from an `hf:NAME` dataset.

    Attributes:
        subsets: hub configs to load one after another (e.g. LLaVA-OneVision's
            "chartqa(cauldron,llava_format)"); empty = the config in the spec, or the default.
        max_rows: per subset, keep a seeded random sample of at most this many rows, chosen
            before any image is read (None = every row).
        seed: seed of that sample.
    """

    subsets: tuple[str, ...] = ()
    max_rows: int | None = None
    seed: int = 0


def _hub_rows(spec: str, split: str | None, hub: HubSelection) -> Iterator[RawRecord]:
    """`hf:NAME[:CONFIG]` (or NAME with `hub.subsets`) through `datasets.load_dataset`."""
    import datasets

    name, _, config = spec[len("hf:"):].partition(":")
    refuse_key_like(name, "dataset name", "hf:ORG/NAME or a local file")  # a pasted key is never sent
    if hub.subsets and config:
        raise ConfigError(f"{spec}: give the hub config in the path or as subsets, not both")
    hf_split = {"val": "validation"}.get(split, split) if split else "train"
    for subset in hub.subsets or (config or None,):
        source = f"hf:{name}:{subset}" if subset else spec
        try:
            dataset = datasets.load_dataset(name, subset, split=hf_split)
        except Exception as exc:  # network, missing dataset or config, ...: no bad record, the whole source
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise MissingDataSource(f"{source}: cannot load the dataset ({type(exc).__name__}: {first}); check "
                                    "its name, the network (or HTTPS_PROXY), or give a local copy") from exc
        if hub.max_rows is not None and len(dataset) > hub.max_rows:
            dataset = dataset.shuffle(seed=hub.seed).select(range(hub.max_rows))
        rows = _dataset_rows(dataset, source, hf_split)
        yield from rows if subset is None else _tagged(rows, subset)


def _tagged(rows: Iterator[RawRecord], subset: str) -> Iterator[RawRecord]:
    """The rows with `subset` set (where the record has no such field), for env assignment."""
    for row in rows:
        if isinstance(row.data, dict):
            row.data.setdefault("subset", subset)
        yield row


def _saved_dataset_rows(path: Path) -> Iterator[RawRecord]:
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
        yield RawRecord(record, source, _position(record, index), None)


def _folder_rows(root: Path, template: str) -> Iterator[RawRecord]:
    """`ROOT/DOMAIN/CLASS/*.png|jpg|jpeg`: env = domain, target = class (underscores -> spaces)."""
    files = sorted(p for p in root.glob("*/*/*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not files:
        raise DataError("no images found; expected ROOT/DOMAIN/CLASS/*.png|jpg|jpeg", str(root))
    for file in files:
        domain, label = file.parent.parent.name, file.parent.name
        rel = file.relative_to(root).as_posix()
        record = {
            "id": rel,
            "image": rel,  # relative to `root`, the row's base_dir
            "instruction": template.replace("{domain}", domain),
            "target": label.replace("_", " "),
            "env": domain,
        }
        # Found by listing ROOT, not named by a data file: a symlinked domain folder is fine.
        yield RawRecord(record, str(root), rel, root, allow_outside_root=True)


def _position(record: object, index: int) -> str:
    """How errors name a record without a line number: its id, else its position."""
    if isinstance(record, dict) and record.get("id") not in (None, ""):
        return str(record["id"])
    return f"record {index + 1}"


# ---------------------------------------------------------------- the format registry


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


def _is_saved_dataset(path: Path) -> bool:
    return path.is_dir() and any((path / marker).is_file() for marker in _HF_MARKERS)


#: Every data format by name, in the order auto-detection tries them (`LoadOptions.fmt`, `data
#: check --format`): adding a format is one entry here and one reader.
DATA_FORMATS: dict[str, DataFormat] = {
    "jsonl": DataFormat(
        read=lambda path, _: _jsonl_rows(path / "data.jsonl" if path.is_dir() else path),
        detect=lambda path: _is_suffix(path, ".jsonl") or (path.is_dir() and (path / "data.jsonl").is_file()),
    ),
    "json": DataFormat(read=lambda path, _: _json_rows(path), detect=lambda path: _is_suffix(path, ".json")),
    "llava": DataFormat(read=lambda path, _: _json_rows(path), detect=None),  # LLaVA's JSON: "json"'s reader
    "parquet": DataFormat(
        read=lambda path, _: _parquet_rows(path),
        detect=lambda path: _is_suffix(path, ".parquet")
        or (path.is_dir() and not _is_saved_dataset(path) and any(path.rglob("*.parquet"))),
    ),
    "hf": DataFormat(read=lambda path, _: _saved_dataset_rows(path), detect=_is_saved_dataset),
    "folder": DataFormat(
        read=lambda path, options: _folder_rows(path, options.instruction_template),
        detect=Path.is_dir,
        record_file=False,
    ),
}


def format_choices(separator: str = "|") -> str:
    """"auto" and every format name, joined by `separator` (the `--format` help)."""
    return separator.join(["auto", *DATA_FORMATS])


# ---------------------------------------------------------------- raw record -> Examples


def _examples_of(row: RawRecord) -> list[Example]:
    """The Examples of one flat or conversation record (environment not assigned yet)."""
    data = row.data
    if not isinstance(data, dict):
        raise row.error("record is not a JSON object")
    record_id = data.get("id")
    if record_id in (None, ""):
        raise row.error("missing field 'id'")
    if isinstance(record_id, bool) or not isinstance(record_id, (str, int)):
        raise row.error(f"field 'id' must be a string or an integer, not {type(record_id).__name__}")
    split = data.get("split") or "train"
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise row.error(f"split {split!r} is not one of {', '.join(SPLITS)}")
    ood = data.get("ood", False)
    if not isinstance(ood, bool):
        raise row.error(f"field 'ood' must be true or false, not {ood!r}")
    shared: dict[str, Any] = {"image": image_ref(data.get("image"), row), "env": "", "split": split, "ood": ood,
              "source": row.location}
    if "conversations" in data:
        return [
            Example(id=f"{record_id}#{turn}", instruction=without_image_placeholder(question),
                    target=answer, **shared)
            for turn, (question, answer) in enumerate(_turn_pairs(data["conversations"], row))
        ]
    return [Example(id=str(record_id), instruction=_text(data, "instruction", row),
                    target=_text(data, "target", row), **shared)]


def _text(data: dict, key: str, row: RawRecord) -> str:
    value = data.get(key)
    if value is None:
        raise row.error(f"missing field {key!r}")
    if not isinstance(value, str):
        raise row.error(f"field {key!r} must be a string, not {type(value).__name__}")
    return value


def _turn_pairs(conversations: object, row: RawRecord) -> list[tuple[str, str]]:
    """(question, answer) pairs of a conversation alternating human and gpt turns."""
    turns = conversations if isinstance(conversations, list) else []
    roles = [turn.get("from") if isinstance(turn, dict) else None for turn in turns]
    if not turns or len(turns) % 2 or roles != ["human", "gpt"] * (len(turns) // 2):
        raise row.error("'conversations' must alternate 'human' and 'gpt' turns, starting with 'human'")
    values = [turn.get("value") for turn in turns]
    if not all(isinstance(value, str) for value in values):
        raise row.error("every conversation turn needs a string 'value'")
    return list(zip(values[::2], values[1::2]))


def without_image_placeholder(text: str) -> str:
    """The instruction with `<image>` placeholders and the whitespace around them removed."""
    return re.sub(r"\s*<image>\s*", " ", text).strip()


def image_ref(value: object, row: RawRecord) -> str | bytes | None:
    """An absolute path or encoded bytes from a path, bytes, HF image dict or PIL image."""
    if value is None:
        return None
    if value == "":
        raise row.error("field 'image' is an empty string: give an image path, or leave the field out "
                        "(or null) for a text-only record")
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        if "\x00" in value:
            raise row.error(f"image path {value!r} holds a NUL byte, which no file name can")
        path = Path(value)
        if row.base_dir is None:  # hub rows: the datasets library's own cache paths
            return str(path)
        full = path if path.is_absolute() else (row.base_dir / path).absolute()
        if not row.allow_outside_root and not full.resolve().is_relative_to(row.base_dir.resolve()):
            raise row.error(
                f"image path {value!r} leaves the data root {row.base_dir} (paths in data files stay "
                "inside it, or inside --image-root); pass --allow-outside-root (data.allow_outside_root) "
                "to allow it"
            )
        return str(full)
    if isinstance(value, dict):
        return image_ref(value.get("bytes") or value.get("path"), row)
    if isinstance(value, Image.Image):
        buffer = io.BytesIO()
        value.save(buffer, format="PNG")
        return buffer.getvalue()
    raise row.error(f"field 'image' must be a path, bytes or an image, not {type(value).__name__}")


# ---------------------------------------------------------------- environments and checks


def _env_label(data: object, env_column: str | None) -> str | None:
    """The record's environment name: `env_column`, else `env`, else `data_source`."""
    if not isinstance(data, dict):
        return None
    value = data.get(env_column) if env_column else (data.get("env") or data.get("data_source"))
    return None if value is None or value == "" else str(value)


def _with_env(ex: Example, label: str | None, env_map: EnvMap | None, task_rules: bool,
              env_column: str | None, row: RawRecord) -> Example:
    if task_rules:
        label = assign_task_type(ex.instruction)
    if label is None:
        field = repr(env_column) if env_column else "'env' or 'data_source'"
        raise row.error(f"missing environment (no {field} field)", ex.id)
    if env_map is None:
        return replace(ex, env=label)
    env = env_map.env_of_id.get(ex.id) or env_map.env_of.get(label)
    if env is None:
        raise row.error(f"environment source {label!r} is not in the env map", ex.id)
    if env in env_map.ood:
        return replace(ex, env=env, ood=True, split="test")
    return replace(ex, env=env)


def _check_text(ex: Example, row: RawRecord) -> None:
    if not ex.instruction.strip():
        raise row.error("empty instruction", ex.id)
    if not ex.target.strip():
        raise row.error("empty target", ex.id)
