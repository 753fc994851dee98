"""Writing synthetic benchmarks to disk: split sizes, seeded streams, records, images, manifest.

An instruction benchmark is written as
    OUT/data.jsonl   one JSON object per line: id, image, instruction, target, env, split, ood (+ extras)
    OUT/images/*.png images referenced by `image` (relative to OUT)
    OUT/manifest.json {"benchmark", "seed", "envs": {env: {"train", "val", "test", "ood"}}, ...}
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

SPLIT_ORDER = ("train", "val", "test")
VAL_FLOOR = 2
TEST_FLOOR = 4


@dataclass(frozen=True)
class SplitSizes:
    """Examples per environment: `train`, `val`, `test` for in-domain envs, `ood_test` for OOD envs."""

    train: int
    val: int
    test: int
    ood_test: int

    def scaled(self, n_train: int | None) -> SplitSizes:
        """Sizes with `n_train` training examples; the others scale proportionally, with floors."""
        if n_train is None:
            return self
        factor = n_train / self.train
        return SplitSizes(
            train=n_train,
            val=max(VAL_FLOOR, round(self.val * factor)),
            test=max(TEST_FLOOR, round(self.test * factor)),
            ood_test=max(TEST_FLOOR, round(self.ood_test * factor)),
        )

    def for_env(self, ood: bool) -> dict[str, int]:
        """Split -> count for one environment (OOD environments only have a test split)."""
        if ood:
            return {"test": self.ood_test}
        return {"train": self.train, "val": self.val, "test": self.test}


def env_rng(seed: int, env: str) -> np.random.Generator:
    """The random stream of one environment: fixed by (seed, env name), independent of other envs."""
    return np.random.default_rng([seed, zlib.crc32(env.encode("utf-8"))])


@dataclass
class SynthRecord:
    """One generated example before it is written; `extra` holds benchmark-specific JSON fields."""

    image: Image.Image
    instruction: str
    target: str
    env: str
    split: str
    ood: bool
    extra: dict = field(default_factory=dict)


def save_png(img: Image.Image, path: Path) -> None:
    """Save `img` as PNG (fixed settings, so equal pixels give equal bytes)."""
    img.save(path, format="PNG", compress_level=6)


def write_instruction_benchmark(
    out_dir: Path,
    benchmark: str,
    seed: int,
    records: Iterable[SynthRecord],
    **manifest_extra: object,
) -> Path:
    """Write `records` as OUT/data.jsonl + OUT/images/ and return the path of OUT/manifest.json.

    Ids are running numbers in generation order ("000000", ...); `manifest_extra` is merged
    into the manifest after the standard keys.
    """
    image_dir = out_dir / "images"
    image_dir.mkdir(parents=True, exist_ok=True)
    envs: dict[str, dict] = {}
    with (out_dir / "data.jsonl").open("w", encoding="utf-8") as f:
        for index, rec in enumerate(records):
            rid = f"{index:06d}"
            rel = f"images/{rid}.png"
            save_png(rec.image, out_dir / rel)
            row = {
                "id": rid,
                "image": rel,
                "instruction": rec.instruction,
                "target": rec.target,
                "env": rec.env,
                "split": rec.split,
                "ood": rec.ood,
                **rec.extra,
            }
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            counts = envs.setdefault(rec.env, {**dict.fromkeys(SPLIT_ORDER, 0), "ood": rec.ood})
            counts[rec.split] += 1
    return write_manifest(
        out_dir, {"benchmark": benchmark, "seed": seed, "envs": envs, **manifest_extra}
    )


def write_manifest(out_dir: Path, manifest: dict) -> Path:
    """Write `manifest` as OUT/manifest.json (indented, key order kept) and return its path."""
    path = out_dir / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
