"""Drawing primitives shared by the synthetic benchmarks: shapes, text, fills, noise.

Coordinates are pixels (x right, y down); angles are radians; colours are RGB
tuples of 0-255 ints. Randomness only ever comes from a `numpy.random.Generator`
passed in by the caller, so every image is a pure function of the seed.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

RGB = tuple[int, int, int]
Point = tuple[float, float]

# Saturated colours that name well in captions (every one has max-min channel gap > 100).
PALETTE: dict[str, RGB] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (235, 200, 30),
    "purple": (140, 60, 190),
    "orange": (245, 130, 20),
}

SHAPE_KINDS = ("circle", "square", "triangle", "star", "pentagon", "hexagon", "cross", "heart")

TEXT_STYLES = ("plain", "bold", "outline", "slant", "wide", "narrow")


def _regular(n: int, phase: float) -> list[Point]:
    return [
        (math.cos(phase + 2 * math.pi * k / n), math.sin(phase + 2 * math.pi * k / n))
        for k in range(n)
    ]


def _star() -> list[Point]:
    points = []
    for k in range(10):
        radius = 1.0 if k % 2 == 0 else 0.45
        angle = -math.pi / 2 + math.pi * k / 5
        points.append((radius * math.cos(angle), radius * math.sin(angle)))
    return points


def _cross() -> list[Point]:
    a = 1 / 3
    return [
        (-a, -1),
        (a, -1),
        (a, -a),
        (1, -a),
        (1, a),
        (a, a),
        (a, 1),
        (-a, 1),
        (-a, a),
        (-1, a),
        (-1, -a),
        (-a, -a),
    ]


def _heart() -> list[Point]:
    points = []
    for k in range(48):
        t = 2 * math.pi * k / 48
        x = 16 * math.sin(t) ** 3
        y = 13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t) - math.cos(4 * t)
        points.append((x / 17, -(y + 2.5) / 17))
    return points


# Unit outlines (radius 1 around the origin); a square's corners lie on the unit circle.
_UNIT_OUTLINES: dict[str, list[Point]] = {
    "circle": _regular(64, 0.0),
    "square": _regular(4, math.pi / 4),
    "triangle": _regular(3, -math.pi / 2),
    "star": _star(),
    "pentagon": _regular(5, -math.pi / 2),
    "hexagon": _regular(6, 0.0),
    "cross": _cross(),
    "heart": _heart(),
}


def shape_polygon(
    kind: str, cx: float, cy: float, radius: float, angle: float = 0.0
) -> list[Point]:
    """Vertices of shape `kind` centred at (cx, cy), fitting a circle of `radius` px, rotated by `angle`."""
    c, s = math.cos(angle), math.sin(angle)
    return [
        (cx + radius * (c * x - s * y), cy + radius * (s * x + c * y))
        for x, y in _UNIT_OUTLINES[kind]
    ]


def jitter_outline(
    points: list[Point], rng: np.random.Generator, amount: float, step: float = 3.0
) -> list[Point]:
    """The closed outline resampled every `step` px, each point moved by up to `amount` px (a hand-drawn line)."""
    closed = np.array([*points, points[0]], dtype=float)
    out: list[Point] = []
    for a, b in zip(closed[:-1], closed[1:]):
        n = max(1, int(np.linalg.norm(b - a) // step))
        for t in np.arange(n) / n:
            p = a + t * (b - a) + rng.uniform(-amount, amount, size=2)
            out.append((float(p[0]), float(p[1])))
    return [*out, out[0]]


def polygon_mask(size: tuple[int, int], points: list[Point]) -> np.ndarray:
    """Float mask (H, W) in [0, 1], 1 inside the polygon, antialiased by 4x supersampling."""
    w, h = size
    big = Image.new("L", (4 * w, 4 * h), 0)
    ImageDraw.Draw(big).polygon([(4 * x, 4 * y) for x, y in points], fill=255)
    return np.asarray(big.resize((w, h), Image.Resampling.BOX), dtype=np.float32) / 255.0


def linear_gradient(size: tuple[int, int], start: RGB, end: RGB, angle: float) -> np.ndarray:
    """Float image (H, W, 3) in 0-255 running from `start` to `end` along direction `angle`."""
    w, h = size
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    proj = (xs - w / 2) * math.cos(angle) + (ys - h / 2) * math.sin(angle)
    t = (proj - proj.min()) / max(float(np.ptp(proj)), 1e-6)
    return (1 - t)[..., None] * np.array(start, np.float32) + t[..., None] * np.array(
        end, np.float32
    )


def smooth_texture(size: tuple[int, int], rng: np.random.Generator, cells: int = 6) -> np.ndarray:
    """Low-frequency random field (H, W) in [-1, 1]: a `cells` x `cells` grid of noise, bilinearly upsampled."""
    coarse = rng.uniform(0, 255, size=(cells, cells)).astype(np.uint8)
    field = np.asarray(Image.fromarray(coarse).resize(size, Image.Resampling.BILINEAR), np.float32)
    return field / 127.5 - 1.0


def add_gaussian_noise(img: Image.Image, rng: np.random.Generator, sigma: float) -> Image.Image:
    """`img` plus i.i.d. Gaussian noise of standard deviation `sigma` (0-255 units), clipped."""
    arr = np.asarray(img, np.float32) + rng.normal(0.0, sigma, size=(img.height, img.width, 3))
    return to_image(arr)


def to_image(arr: np.ndarray) -> Image.Image:
    """RGB image from a float (H, W, 3) array in 0-255 (rounded and clipped)."""
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")


def jitter_colour(colour: RGB, rng: np.random.Generator, amount: int) -> RGB:
    """`colour` with each channel moved by up to `amount` (clipped to 0-255)."""
    shifted = np.clip(np.array(colour) + rng.integers(-amount, amount + 1, size=3), 0, 255)
    return (int(shifted[0]), int(shifted[1]), int(shifted[2]))


@lru_cache(maxsize=64)
def font(size: int) -> ImageFont.FreeTypeFont:
    """Pillow's bundled scalable font at `size` px (no system fonts, so output is machine-independent)."""
    return ImageFont.load_default(size=size)  # type: ignore[return-value]


def text_width(text: str, size: int) -> int:
    """Width in px of `text` drawn in the bundled font at `size`."""
    left, _, right, _ = font(size).getbbox(text)
    return int(right - left)


def text_patch(
    text: str, size: int, colour: RGB, style: str = "plain", stroke: RGB = (0, 0, 0)
) -> Image.Image:
    """`text` drawn on a transparent RGBA patch cropped to the ink, in one of `TEXT_STYLES`.

    The bundled font is the only font; styles (stroke weight, outline, shear, horizontal
    stretch) stand in for typeface variety.
    """
    f = font(size)
    pad = size
    left, top, right, bottom = f.getbbox(text)
    patch = Image.new("RGBA", (right - left + 2 * pad, bottom - top + 2 * pad), (0, 0, 0, 0))  # type: ignore[arg-type]  # PIL stubs: FreeTypeFont.getbbox gives ints
    draw = ImageDraw.Draw(patch)
    xy = (pad - left, pad - top)
    if style == "bold":
        draw.text(
            xy, text, font=f, fill=colour, stroke_width=max(1, size // 14), stroke_fill=colour
        )
    elif style == "outline":
        draw.text(
            xy, text, font=f, fill=colour, stroke_width=max(1, size // 10), stroke_fill=stroke
        )
    else:
        draw.text(xy, text, font=f, fill=colour)
    if style == "slant":
        shear = 0.3
        patch = patch.transform(
            patch.size,
            Image.Transform.AFFINE,
            (1, shear, -shear * patch.height / 2, 0, 1, 0),
            Image.Resampling.BILINEAR,
        )
    elif style in ("wide", "narrow"):
        factor = 1.4 if style == "wide" else 0.75
        patch = patch.resize(
            (max(1, round(patch.width * factor)), patch.height), Image.Resampling.BILINEAR
        )
    bbox = patch.getbbox()
    return patch.crop(bbox) if bbox else patch


def paste_patch(img: Image.Image, patch: Image.Image, xy: tuple[int, int]) -> None:
    """Alpha-composite an RGBA `patch` onto RGB `img` (in place) with its top-left corner at `xy`."""
    img.paste(patch, xy, patch)


def new_canvas(size: int, colour: RGB) -> Image.Image:
    """A `size` x `size` RGB image filled with `colour`."""
    return Image.new("RGB", (size, size), colour)
