"""Graded-severity styles of a grey scan: the `fashion-test-graded` suite's natural-style shifts.

The `fashion` suites' `rotated`, `coloured` and `inverted` styles take every model of the zoo to
chance or near it; a line between a reference and a shifted test set needs shifts under which
models keep part of their accuracy. These styles are milder versions of the same kinds, plus
common corruptions (blur, low contrast, translation). Their severities are fixed a priori, set
before any model was scored on them, each at about half the strength of the `fashion` style of
the same kind or at a moderate corruption level:

    rotated-small  rotation by 10-20 degrees (the `rotated` style turns 25-60), either way
    tinted         the `coloured` rendering blended half-and-half with the clean one
    low-contrast   contrast halved about mid-grey: 128 + 0.5 (x - 128)
    blurred        Gaussian blur, sigma 1.5 px (on the 64x64 frame; the scan is 48x48)
    shifted        translation by up to 8 px along each axis (the frame's margin), zero-filled
    noisier        Gaussian pixel noise of sigma 140 (the `noisy` style's 70, doubled)

Each takes the 48x48 ink in [0, 1] and the style's random stream and returns a 64x64 RGB image,
like the `domains` styles. PIL draws the rotation and the blur (`Image.rotate`,
`ImageFilter.GaussianBlur`); the rest is numpy arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PIL import Image, ImageFilter

from robustvlm.data.synth.domains import DIGIT_SIZE, FASHION_STYLES, SIZE
from robustvlm.data.synth.draw import add_gaussian_noise, to_image

#: The a-priori severities (module doc).
SMALL_ROTATION_DEGREES = (10.0, 20.0)
TINT_WEIGHT = 0.5
CONTRAST_FACTOR = 0.5
BLUR_SIGMA = 1.5
MAX_SHIFT_PX = (SIZE - DIGIT_SIZE) // 2
STRONG_NOISE_SIGMA = 140.0

_clean = FASHION_STYLES["clean"]
_coloured = FASHION_STYLES["coloured"]


def rotated_small(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    """The clean frame turned by 10-20 degrees either way (bilinear, black fill)."""
    angle = float(rng.uniform(*SMALL_ROTATION_DEGREES)) * (1 if rng.random() < 0.5 else -1)
    return _clean(ink, rng).rotate(angle, Image.Resampling.BILINEAR, fillcolor=(0, 0, 0))


def tinted(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    """The `coloured` rendering (random hue background and stroke) mixed TINT_WEIGHT into the clean one."""
    return Image.blend(_clean(ink, rng), _coloured(ink, rng), TINT_WEIGHT)


def low_contrast(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    """The clean frame with its contrast scaled by CONTRAST_FACTOR about mid-grey (128)."""
    arr = np.asarray(_clean(ink, rng), np.float32)
    return to_image(128.0 + CONTRAST_FACTOR * (arr - 128.0))


def blurred(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    """The clean frame under a Gaussian blur of BLUR_SIGMA pixels."""
    return _clean(ink, rng).filter(ImageFilter.GaussianBlur(BLUR_SIGMA))


def shift_frame(arr: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """(H, W, ...) array moved `dy` rows down and `dx` columns right, zero-filled (no wrap)."""
    out = np.zeros_like(arr)
    h, w = arr.shape[:2]
    out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = arr[max(-dy, 0):h - max(dy, 0),
                                                                      max(-dx, 0):w - max(dx, 0)]
    return out


def shifted(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    """The clean frame translated by a whole number of pixels in [-8, 8] along each axis."""
    dy, dx = (int(v) for v in rng.integers(-MAX_SHIFT_PX, MAX_SHIFT_PX + 1, size=2))
    return Image.fromarray(shift_frame(np.asarray(_clean(ink, rng)), dy, dx), "RGB")


def noisier(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    """The clean frame plus Gaussian pixel noise of sigma STRONG_NOISE_SIGMA (0-255 units), clipped."""
    return add_gaussian_noise(_clean(ink, rng), rng, STRONG_NOISE_SIGMA)


#: The `fashion-test-graded` suite's domains: the reference and the graded shifts.
GRADED_STYLES: dict[str, Callable[[np.ndarray, np.random.Generator], Image.Image]] = {
    "clean": _clean,
    "rotated-small": rotated_small,
    "tinted": tinted,
    "low-contrast": low_contrast,
    "blurred": blurred,
    "shifted": shifted,
    "noisier": noisier,
}
