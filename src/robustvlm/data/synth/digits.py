"""`digits`: the ColoredMNIST construction on scikit-learn's bundled handwritten digits.

Real 8x8 scans (`sklearn.datasets.load_digits`, shipped with scikit-learn, no download)
upscaled bilinearly to 64x64, white strokes on a red or green background. Question:
"Is the digit small (0-4) or large (5-9)?"; 25% label noise and colour agreement
0.9 / 0.8 / 0.1 / 0.5 as in `spurious` (see `shortcut`). Training images and
val/test images come from disjoint halves of the scans.
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from robustvlm.data.synth.draw import RGB, to_image
from robustvlm.data.synth.shortcut import generate_coloured, manifest_fields
from robustvlm.data.synth.writer import SplitSizes, write_instruction_benchmark

SIZE = 64
ANSWERS = ("small", "large")
INSTRUCTION = "Is the digit small (0-4) or large (5-9)?"
DEFAULT_SIZES = SplitSizes(train=500, val=50, test=100, ood_test=500)
TRAIN_POOL_FRACTION = 0.6


@lru_cache(maxsize=1)
def digit_scans() -> tuple[np.ndarray, np.ndarray]:
    """sklearn's digits: images (1797, 8, 8) of ink in [0, 1], labels (1797,) in 0-9."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images.astype(np.float32) / 16.0, bunch.target.astype(np.int64)


def digit_ink(index: int, size: int = SIZE) -> np.ndarray:
    """Ink of scan `index` upscaled bilinearly to (size, size), values in [0, 1]."""
    scan = Image.fromarray(np.rint(digit_scans()[0][index] * 255).astype(np.uint8))
    return np.asarray(scan.resize((size, size), Image.Resampling.BILINEAR), np.float32) / 255.0


def ink_on(ink: np.ndarray, background: RGB, stroke: RGB = (255, 255, 255)) -> Image.Image:
    """RGB image blending `stroke` over `background` with the (H, W) ink as opacity."""
    alpha = ink[..., None]
    return to_image(
        (1 - alpha) * np.array(background, np.float32) + alpha * np.array(stroke, np.float32)
    )


class ScanPools:
    """Disjoint train and held-out pools of image indices, each read in a cycle; an image's binary
    class is 1 for labels 5-9 (the Colored MNIST split).

    Envs draw one after another from the same cursor, so they get distinct scans until
    a pool is used up; only then do scans repeat.
    """

    def __init__(self, labels: np.ndarray, seed: int):
        self.labels = labels
        n = len(labels)
        order = np.random.default_rng([seed, zlib.crc32(b"digit-pools")]).permutation(n)
        cut = round(n * TRAIN_POOL_FRACTION)
        self.pools = {False: order[:cut], True: order[cut:]}
        self.cursors = {False: 0, True: 0}

    def sample(
        self, rng: np.random.Generator, n: int, held_out: bool
    ) -> tuple[np.ndarray, list[int]]:
        """Next `n` scans of a pool: binary classes (n,) (1 for labels 5-9) and scan indices."""
        pool, start = self.pools[held_out], self.cursors[held_out]
        indices = [int(i) for i in pool[(start + np.arange(n)) % len(pool)]]
        self.cursors[held_out] = (start + n) % len(pool)
        return (self.labels[indices] >= 5).astype(np.int64), indices


def render_digit(index: int, background: RGB, rng: np.random.Generator) -> Image.Image:
    """Scan `index` in white on `background`."""
    return ink_on(digit_ink(index), background)


def describe_digit(index: int) -> dict:
    return {"digit": int(digit_scans()[1][index]), "source_index": index}


def build(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """Write the `digits` benchmark to `out_dir`; returns the manifest path."""
    records = generate_coloured(
        seed,
        DEFAULT_SIZES.scaled(n_per_env),
        answers=ANSWERS,
        instruction=INSTRUCTION,
        sample=ScanPools(digit_scans()[1], seed).sample,
        render=render_digit,
        describe=describe_digit,
    )
    return write_instruction_benchmark(
        out_dir,
        "digits",
        seed,
        records,
        image_size=SIZE,
        source="sklearn.datasets.load_digits",
        **manifest_fields(ANSWERS),
    )
