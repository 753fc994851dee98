"""`spurious`: a generative ColoredMNIST with shapes.

A grey-white square or circle (jittered size, position and shade; the two shapes have
equal area, so size is no cue) on a red or green background. Question: "What shape is
shown?"; the answer carries 25% label noise and the background colour agrees with the
answer with probability 0.9 / 0.8 in training, 0.1 / 0.5 in the OOD test environments
(see `shortcut`). Images are 64x64 RGB.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from robustvlm.data.synth.draw import RGB, new_canvas, shape_polygon
from robustvlm.data.synth.shortcut import generate_coloured, manifest_fields
from robustvlm.data.synth.writer import SplitSizes, write_instruction_benchmark

SIZE = 64
ANSWERS = ("square", "circle")
INSTRUCTION = "What shape is shown?"
DEFAULT_SIZES = SplitSizes(train=500, val=50, test=100, ood_test=500)
# A square whose corners lie at radius r has area 2 r^2; scale it to match a circle's pi r^2.
SQUARE_SCALE = math.sqrt(math.pi / 2)


def sample_shapes(rng: np.random.Generator, n: int, held_out: bool) -> tuple[np.ndarray, list[int]]:
    """(n,) balanced-in-expectation classes; the payload is the class itself."""
    clean = rng.integers(0, 2, size=n)
    return clean, [int(c) for c in clean]


def render_shape(shape: int, background: RGB, rng: np.random.Generator) -> Image.Image:
    """Shape `ANSWERS[shape]` in a light grey on `background`."""
    img = new_canvas(SIZE, background)
    radius = float(rng.uniform(10, 18))
    scale = SQUARE_SCALE if ANSWERS[shape] == "square" else 1.0
    margin = math.ceil(radius * scale) + 2
    cx, cy = (float(v) for v in rng.uniform(margin, SIZE - margin, size=2))
    shade = int(rng.integers(180, 256))
    points = shape_polygon(ANSWERS[shape], cx, cy, radius * scale)
    ImageDraw.Draw(img).polygon(points, fill=(shade, shade, shade))
    return img


def build(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """Write the `spurious` benchmark to `out_dir`; returns the manifest path."""
    records = generate_coloured(
        seed,
        DEFAULT_SIZES.scaled(n_per_env),
        answers=ANSWERS,
        instruction=INSTRUCTION,
        sample=sample_shapes,
        render=render_shape,
        describe=lambda payload: {},
    )
    return write_instruction_benchmark(
        out_dir, "spurious", seed, records, image_size=SIZE, **manifest_fields(ANSWERS)
    )
