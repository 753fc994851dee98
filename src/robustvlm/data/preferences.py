"""Preference pairs: the record, and reading them from any supported layout and file type.

    load_pairs("rlaif_v.parquet")            # layout auto-detected from the columns
    load_pairs("hf:MMInstruction/VL-RewardBench", split="test", fmt="vl-rewardbench")

Files are JSONL, JSON lists, parquet, saved `datasets` folders or `hf:NAME[:CONFIG]`; the layout
(`robustvlm.data.preference_layouts`) is named by `fmt` or recognised from the first record's
columns (`auto`), and said. Every pair is checked: a query and two non-empty responses that
differ, an image that exists and decodes, a numeric margin, a known split, a unique id. A bad
record raises a DataError naming the file, the line or record and its id, or, with
`on_bad_record="skip"`, is counted in the skip log. Pairs a layout leaves out on purpose (tied
ratings) are counted in `PairSet.left_out`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from robustvlm.config import PreferenceDataConfig
from robustvlm.data.carve import carve_per_env, short_environments
from robustvlm.data.environments import format_env_counts
from robustvlm.data.from_config import materialize
from robustvlm.data.images import DEFAULT_MAX_PIXELS, load_image
from robustvlm.data.loaders import SPLIT_ALIASES, RawRecord, check_new_id, image_ref, raw_records
from robustvlm.data.preference_layouts import (
    LAYOUTS,
    MEAN_ASPECT,
    Layout,
    detect_layout,
    layout_named,
)
from robustvlm.data.records import SPLITS, Example, SkipLog, bad_record_handler
from robustvlm.errors import ConfigError, DataError


@dataclass
class PreferencePair:
    """One preference judgement: for `image` and `query`, `chosen` is better than `rejected`.

    Attributes:
        id: unique id within the dataset.
        image: an absolute image path or the encoded bytes of an image file.
        query: the user's question or instruction (no image placeholder).
        chosen, rejected: the preferred and the dispreferred response.
        env: environment name (dataset, source, shortcut condition...).
        split: "train", "val" or "test".
        margin: how much better chosen is (the loss asks r_chosen - r_rejected to exceed it);
            None when the data gives none.
        ood: True for environments held out of training (test only).
        source: file (and line) the record came from, for error messages.
        category: the benchmark category the record's authors report accuracy by (e.g.
            VL-RewardBench's "hallucination"); None when the data gives none.
    """

    id: str
    image: str | bytes
    query: str
    chosen: str
    rejected: str
    env: str
    split: str = "train"
    margin: float | None = None
    ood: bool = False
    source: str = ""
    category: str | None = None

    def example(self, response: str, image: str | bytes | None = ...) -> Example:  # type: ignore[assignment]
        """The pair's query answered by `response` as an instruction Example (what the collator
        encodes); `image=None` drops the image, the default keeps the pair's."""
        return Example(
            id=self.id, image=self.image if image is ... else image, instruction=self.query,
            target=response, env=self.env, split=self.split, source=self.source,
        )


@dataclass
class PairSet:
    """Pairs read from one or more files, the layout each file was read as, and the pairs that
    layouts left out on purpose ({reason: count})."""

    pairs: list[PreferencePair] = field(default_factory=list)
    layouts: dict[str, str] = field(default_factory=dict)
    left_out: Counter = field(default_factory=Counter)

    def extend(self, other: PairSet) -> None:
        self.pairs += other.pairs
        self.layouts.update(other.layouts)
        self.left_out.update(other.left_out)

    def describe(self) -> str:
        """One line per file (its layout), then what was left out."""
        lines = [f"{file}: layout {name}" for file, name in self.layouts.items()]
        lines += [f"left out {n} pair(s): {reason}" for reason, n in sorted(self.left_out.items())]
        return "\n".join(lines)


@dataclass(frozen=True)
class PairOptions:
    """How to read a preference dataset.

    Attributes:
        fmt: a layout name, or "auto" (recognised from the first record's columns).
        split: keep only this split ("train", "val", "test"); for `hf:` also the split loaded.
        env: environment of records that name none (default: the layout's name).
        env_column: the record field naming the environment (default `env`).
        image_root: folder that relative image paths are taken from (COCO for POVID).
        allow_outside_root: accept image paths that resolve outside the data root.
        aspect: VLFeedback rating to form pairs by: an aspect name or "mean".
        validate_images: fully decode every image once to find bad ones.
        max_pixels: images with more pixels are bad records.
    """

    fmt: str = "auto"
    split: str | None = None
    env: str | None = None
    env_column: str | None = None
    image_root: str | Path | None = None
    allow_outside_root: bool = False
    aspect: str = MEAN_ASPECT
    validate_images: bool = True
    max_pixels: int = DEFAULT_MAX_PIXELS


def read_pairs(path: str | Path, on_error: Callable[[DataError], None], options: PairOptions = PairOptions()) -> PairSet:
    """Pairs of one dataset (a record file or folder, or `hf:NAME[:CONFIG]`), in file order;
    every bad record goes to `on_error` and is dropped."""
    fmt, split, aspect = options.fmt, options.split, options.aspect
    if split is not None and split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    layout = layout_named(fmt, aspect)
    out = PairSet()
    seen: dict[str, str] = {}
    for row in raw_records(path, split=split, image_root=options.image_root,
                           allow_outside_root=options.allow_outside_root):
        if isinstance(row, DataError):
            on_error(row)
            continue
        if layout is None:
            layout = _detect(row)
        out.layouts.setdefault(row.file, layout.name)
        try:
            converted = layout.convert(row.data, row, aspect) if isinstance(row.data, dict) else None
            if converted is None:
                raise row.error("record is not a JSON object")
        except DataError as error:
            on_error(error)
            continue
        out.left_out.update(converted.left_out)
        for fields in converted.pairs:
            try:
                pair = _checked(fields, row, layout, options, seen)
            except DataError as error:
                on_error(error)
                continue
            if pair is not None:
                seen[pair.id] = pair.source
                out.pairs.append(pair)
    return out


def load_pairs(
    path: str | Path,
    *,
    on_bad_record: str = "error",
    skip_log: SkipLog | None = None,
    verbose: bool = True,
    **options: Any,
) -> PairSet:
    """`read_pairs` with `PairOptions(**options)` that raises the first bad record ("error") or
    counts each in `skip_log` ("skip"); with `verbose`, prints the layout and the
    per-environment counts."""
    on_error, log = bad_record_handler(on_bad_record, skip_log)
    before = len(log)
    pairs = read_pairs(path, on_error, PairOptions(**options))
    if verbose:
        print(pairs.describe())
        print(format_env_counts(pairs.pairs))
        if len(log) > before:
            print(f"skipped {len(log) - before} bad record(s)")
    return pairs


def _detect(row: RawRecord) -> Layout:
    columns = set(row.data) if isinstance(row.data, dict) else set()
    layout = detect_layout(columns)
    if layout is None:
        raise DataError(
            f"cannot recognise a preference layout from the columns {sorted(columns)}; pass the "
            f"format ({', '.join(LAYOUTS)})",
            row.file,
        )
    return layout


def _checked(
    fields: dict, row: RawRecord, layout: Layout, options: PairOptions, seen: dict[str, str]
) -> PreferencePair | None:
    """A PreferencePair from converted fields (None when it is not of `options.split`), or a
    DataError naming what is wrong (`seen`: the ids read so far, and where)."""
    env_column = options.env_column
    pair_id = fields["id"]
    where = row.where(pair_id)
    split = fields.get("split") or layout.default_split
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise row.error(f"split {split!r} is not one of {', '.join(SPLITS)}", pair_id)
    if options.split is not None and split != options.split:
        return None
    for key in ("query", "chosen", "rejected"):
        if not fields[key].strip():
            raise row.error(f"empty {key}", pair_id)
    if fields["chosen"].strip() == fields["rejected"].strip():
        raise row.error("chosen and rejected are the same response", pair_id)
    image = image_ref(fields["image"], row)
    if image is None:
        raise row.error("no image: a preference pair needs the image its responses describe", pair_id)
    if options.validate_images:
        load_image(image, **where, max_pixels=options.max_pixels)
    # read_pairs converts only records that are JSON objects
    label = cast(dict, row.data).get(env_column) if env_column else fields.get("env")
    if env_column and label in (None, ""):
        raise row.error(f"missing environment (no {env_column!r} field)", pair_id)
    check_new_id(seen, pair_id, row)
    return PreferencePair(
        id=pair_id, image=image, query=fields["query"], chosen=fields["chosen"],
        rejected=fields["rejected"], env=str(label) if label not in (None, "") else options.env or layout.name,
        split=split, margin=fields.get("margin"), source=row.location, category=fields.get("category"),
    )


def load_pairs_from_config(
    cfg: PreferenceDataConfig, work_dir: Path, skip_log: SkipLog | None = None, verbose: bool = True
) -> PairSet:
    """Every pair of the configured data (a built-in benchmark is synthesised once into
    `work_dir/data`), each source its own environment, filtered to `cfg.envs` and, with
    `split_per_env`, each environment carved into its train / test sets (`data.carve`)."""
    common: dict[str, Any] = dict(on_bad_record=cfg.on_bad_record, skip_log=skip_log, verbose=False,
                  env_column=cfg.env_column, aspect=cfg.aspect, max_pixels=cfg.max_pixels,
                  allow_outside_root=cfg.allow_outside_root)
    if cfg.sources:
        pairs = PairSet()
        for env, source in cfg.sources.items():
            pairs.extend(load_pairs(
                source.path, fmt=source.format, split=source.split, env=env,
                image_root=source.image_root, **common,
            ))
    else:
        pairs = load_pairs(materialize(cfg, work_dir), fmt=cfg.format, split=cfg.split,
                           image_root=cfg.image_root, **common)
    if cfg.envs is not None:
        missing = sorted(set(cfg.envs) - {p.env for p in pairs.pairs})
        if missing:
            raise ConfigError(f"data.envs: no pairs in environment(s) {missing}")
        pairs.pairs = [p for p in pairs.pairs if p.env in cfg.envs]
    if cfg.split_per_env is not None:
        sizes = cfg.split_per_env
        pairs.pairs, counts = carve_per_env(pairs.pairs, train=sizes.train, test=sizes.test, seed=cfg.seed)
        for line in short_environments(counts) if verbose else []:
            print(f"warning: {line}")
    if verbose:
        print(pairs.describe())
        print(format_env_counts(pairs.pairs))
    return pairs
