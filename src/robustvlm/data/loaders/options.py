"""How a dataset is read: `LoadOptions`, and `HubSelection` for `hf:NAME` datasets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from robustvlm.data.images import DEFAULT_MAX_PIXELS


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
