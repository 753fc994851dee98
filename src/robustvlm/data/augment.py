"""Varied pretraining pictures: augmentations drawn from a documented distribution, and the rule
that keeps the evaluation shifts out of it.

The distribution (`draw`), applied in this order to an RGB picture, each step with its own
probability and its parameter uniform in the range given (`TRAINING_RANGES`):

    step          probability  parameter (magnitude)
    random crop   0.5          zoom 1.05-1.25 (crop side = side / zoom, anywhere inside the
                               frame), resized back (bilinear): random crops and scale
    rotation      0.5          0-7 degrees either way (bilinear, black fill)
    tint          0.5          weight 0.05-0.25 of the picture times a random hue
                               (saturation 0.5-1, value 1): colour jitter and tinting
    brightness    0.5          an offset of 0-0.08 of full scale either way
    contrast      0.5          a factor 1 +- (0-0.3) about the picture's mean
    blur          0.3          Gaussian, sigma 0.2-0.6 px
    noise         0.3          Gaussian pixel noise, sigma 2-10 (0-255 units)

**The rule** (written before any model was scored on augmented pretraining, and checked by
`tests/data/test_augment.py`): for every kind of transformation that an evaluation shift applies,
the training range of its magnitude and every evaluation shift's range of that kind are disjoint
(`EVALUATION_RANGES`: the `fashion` suites' rotated / coloured / inverted / noisy styles, the graded
suite's styles, and the ImageNet-C corruptions at all five severities). The identity (the clean
picture, no augmentation) is the reference domain and is drawn in training on purpose. Kinds an
evaluation shift applies and training never does (ImageNet-C's shot, impulse and speckle noise,
defocus, glass, motion and zoom blur, snow, frost, fog, elastic, pixelate, jpeg, spatter, saturate;
inversion; translation at zoom 1, the graded `shifted` style: training translates only inside a
crop that magnifies by at least 1.05) are out of training by construction. The test checks both
the tables (disjoint ranges) and the sampler (every drawn parameter inside its training range).
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

from robustvlm.data.corruptions import GAUSSIAN_BLUR, GLASS_BLUR
from robustvlm.data.synth.domains import DIGIT_NOISE_SIGMA, ROTATION_DEGREES
from robustvlm.data.synth.draw import to_image
from robustvlm.data.synth.graded import (
    BLUR_SIGMA,
    CONTRAST_FACTOR,
    SMALL_ROTATION_DEGREES,
    STRONG_NOISE_SIGMA,
    TINT_WEIGHT,
)

#: Training magnitude ranges per kind (module doc), the probability of each step.
TRAINING_RANGES: dict[str, tuple[float, float]] = {
    "zoom_excess": (0.05, 0.25),  # zoom - 1 of a crop
    "rotation_degrees": (0.0, 7.0),
    "tint_weight": (0.05, 0.25),
    "brightness_shift": (0.0, 0.08),  # fraction of full scale
    "contrast_change": (0.0, 0.3),  # |factor - 1|
    "blur_sigma": (0.2, 0.6),  # px (glass_blur starts at 0.7)
    "noise_sigma": (2.0 / 255, 10.0 / 255),  # fraction of full scale
}
PROBABILITY = {"zoom_excess": 0.5, "rotation_degrees": 0.5, "tint_weight": 0.5, "brightness_shift": 0.5,
               "contrast_change": 0.5, "blur_sigma": 0.3, "noise_sigma": 0.3}

#: Every evaluation shift's magnitude range, per kind: (shift, (low, high)).
EVALUATION_RANGES: dict[str, list[tuple[str, tuple[float, float]]]] = {
    "rotation_degrees": [("rotated", ROTATION_DEGREES), ("rotated-small", SMALL_ROTATION_DEGREES)],
    "tint_weight": [("coloured", (1.0, 1.0)), ("tinted", (TINT_WEIGHT, TINT_WEIGHT))],
    "brightness_shift": [("imagenet-c brightness", (0.1, 0.5))],
    "contrast_change": [("low-contrast", (1 - CONTRAST_FACTOR, 1 - CONTRAST_FACTOR)),
                        ("imagenet-c contrast", (1 - 0.4, 1 - 0.05)), ("inverted", (2.0, 2.0))],
    "blur_sigma": [("blurred", (BLUR_SIGMA, BLUR_SIGMA)),
                   ("imagenet-c gaussian_blur", (min(GAUSSIAN_BLUR), max(GAUSSIAN_BLUR))),
                   ("imagenet-c glass_blur", (min(g[0] for g in GLASS_BLUR), max(g[0] for g in GLASS_BLUR)))],
    "noise_sigma": [("noisy", (DIGIT_NOISE_SIGMA / 255, DIGIT_NOISE_SIGMA / 255)),
                    ("noisier", (STRONG_NOISE_SIGMA / 255, STRONG_NOISE_SIGMA / 255)),
                    ("imagenet-c gaussian_noise", (0.08, 0.38))],
}


@dataclass(frozen=True)
class Augmentation:
    """One draw of the distribution: each magnitude 0 when its step is not applied; `sign`s of
    rotation, brightness and contrast (+1 / -1), the crop's offset as a fraction of the free
    margin (x, y in [0, 1]) and the tint's RGB colour in [0, 1]; `noise_seed` seeds the noise."""

    zoom_excess: float
    offset: tuple[float, float]
    rotation_degrees: float
    tint_weight: float
    tint: tuple[float, float, float]
    brightness_shift: float
    contrast_change: float
    blur_sigma: float
    noise_sigma: float
    signs: tuple[int, int, int]
    noise_seed: int


def _magnitude(kind: str, rng: np.random.Generator) -> float:
    applied = rng.random() < PROBABILITY[kind]
    value = float(rng.uniform(*TRAINING_RANGES[kind]))
    return value if applied else 0.0


def draw(rng: np.random.Generator) -> Augmentation:
    """One augmentation from the distribution (a fixed number of draws from `rng`)."""
    magnitudes = {kind: _magnitude(kind, rng) for kind in TRAINING_RANGES}
    offset = (float(rng.random()), float(rng.random()))
    tint = colorsys.hsv_to_rgb(float(rng.random()), float(rng.uniform(0.5, 1.0)), 1.0)
    signs = tuple(int(s) for s in rng.choice([-1, 1], size=3))
    return Augmentation(offset=offset, tint=tint, signs=signs,  # type: ignore[arg-type]
                        noise_seed=int(rng.integers(2**31)), **magnitudes)


def _crop(img: Image.Image, zoom: float, offset: tuple[float, float]) -> Image.Image:
    w, h = img.size
    cw, ch = w / zoom, h / zoom
    left, top = offset[0] * (w - cw), offset[1] * (h - ch)
    return img.resize((w, h), Image.Resampling.BILINEAR, box=(left, top, left + cw, top + ch))


def apply(img: Image.Image, a: Augmentation) -> Image.Image:
    """`img` (RGB) under augmentation `a`, in the module doc's order."""
    img = img.convert("RGB")
    if a.zoom_excess:
        img = _crop(img, 1.0 + a.zoom_excess, a.offset)
    if a.rotation_degrees:
        img = img.rotate(a.signs[0] * a.rotation_degrees, Image.Resampling.BILINEAR, fillcolor=(0, 0, 0))
    x = np.asarray(img, np.float32)
    x = (1 - a.tint_weight) * x + a.tint_weight * x * np.array(a.tint, np.float32)
    x = x + a.signs[1] * a.brightness_shift * 255
    x = x.mean(axis=(0, 1), keepdims=True) + (1 + a.signs[2] * a.contrast_change) * (x - x.mean(axis=(0, 1),
                                                                                              keepdims=True))
    img = to_image(x)
    if a.blur_sigma:
        img = img.filter(ImageFilter.GaussianBlur(a.blur_sigma))
    if a.noise_sigma:
        noise = np.random.default_rng(a.noise_seed).normal(0.0, a.noise_sigma * 255, size=(img.height, img.width, 3))
        img = to_image(np.asarray(img, np.float32) + noise)
    return img


def augment(img: Image.Image, rng: np.random.Generator) -> Image.Image:
    """`img` under one augmentation drawn from `rng`."""
    return apply(img, draw(rng))
