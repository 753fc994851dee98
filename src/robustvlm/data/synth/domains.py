"""`domains`: a domain-shift suite of image folders, ROOT/DOMAIN/CLASS/*.png (64x64 RGB).

    shapes/{photo,sketch,cartoon,noisy}/{circle,...,heart}/   eight shape classes
    digits/{clean,rotated,coloured,noisy}/{zero,...,nine}/     sklearn's handwritten digits

Image i of a class shows the same geometry (shape, position, size, rotation, colour)
or the same digit scan in every domain, so domains differ in style only. Used for
multiple-choice, zero-shot and in-context (k-shot) evaluation.
"""

from __future__ import annotations

import colorsys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from robustvlm.data.real_images import DIGIT_NAMES
from robustvlm.data.synth.digits import digit_ink, digit_scans, ink_on
from robustvlm.data.synth.draw import (
    RGB,
    SHAPE_KINDS,
    add_gaussian_noise,
    jitter_outline,
    linear_gradient,
    new_canvas,
    polygon_mask,
    shape_polygon,
    smooth_texture,
    to_image,
)
from robustvlm.data.synth.writer import env_rng, save_png, write_manifest

SIZE = 64
DIGIT_SIZE = 48
DEFAULT_PER_CLASS = 30
PHOTO_NOISE_SIGMA = 60.0
DIGIT_NOISE_SIGMA = 70.0
#: The `rotated` style's angle range (degrees, either way).
ROTATION_DEGREES = (25.0, 60.0)


def _hsv(h: float, s: float, v: float) -> RGB:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, s, v)
    return (round(255 * r), round(255 * g), round(255 * b))


@dataclass(frozen=True)
class Geometry:
    """Where and how one shape is drawn: centre (px), radius (px), rotation (rad), hue in [0, 1)."""

    kind: str
    cx: float
    cy: float
    radius: float
    angle: float
    hue: float

    def polygon(self) -> list[tuple[float, float]]:
        return shape_polygon(self.kind, self.cx, self.cy, self.radius, self.angle)


def sample_geometry(kind: str, rng: np.random.Generator) -> Geometry:
    radius = float(rng.uniform(14, 22))
    cx, cy = (float(v) for v in rng.uniform(radius + 3, SIZE - radius - 3, size=2))
    return Geometry(kind, cx, cy, radius, float(rng.uniform(-0.5, 0.5)), float(rng.random()))


def render_photo(g: Geometry, rng: np.random.Generator) -> Image.Image:
    """Textured gradient background, soft drop shadow, shape lit from the top left with a highlight."""
    bg_hue = float(rng.random())
    bg = linear_gradient(
        (SIZE, SIZE),
        _hsv(bg_hue, 0.25, 0.85),
        _hsv(bg_hue + 0.1, 0.3, 0.55),
        float(rng.uniform(0, 2 * np.pi)),
    )
    bg += 18.0 * smooth_texture((SIZE, SIZE), rng)[..., None]
    mask = polygon_mask((SIZE, SIZE), g.polygon())
    shadow_img = Image.fromarray(np.rint(mask * 255).astype(np.uint8)).filter(
        ImageFilter.GaussianBlur(2)
    )
    shadow = np.roll(np.asarray(shadow_img, np.float32) / 255.0, (3, 3), axis=(0, 1))
    bg *= (1 - 0.45 * shadow)[..., None]
    ys, xs = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    hx, hy = g.cx - 0.4 * g.radius, g.cy - 0.4 * g.radius
    dist = np.hypot(xs - hx, ys - hy) / (2 * g.radius)
    light = np.clip(1.1 - dist, 0.35, 1.0)
    highlight = 90.0 * np.exp(-((dist / 0.18) ** 2))
    fill = light[..., None] * np.array(_hsv(g.hue, 0.75, 0.95), np.float32) + highlight[..., None]
    return to_image((1 - mask[..., None]) * bg + mask[..., None] * fill)


def render_sketch(g: Geometry, rng: np.random.Generator) -> Image.Image:
    """Dark pencil outline, traced twice with hand jitter, on off-white paper."""
    paper = np.full((SIZE, SIZE, 3), float(rng.integers(240, 256)), np.float32)
    img = to_image(paper + 5.0 * smooth_texture((SIZE, SIZE), rng, cells=16)[..., None])
    draw = ImageDraw.Draw(img)
    ink = int(rng.integers(20, 90))
    for _ in range(2):
        draw.line(
            jitter_outline(g.polygon(), rng, amount=1.2),
            fill=(ink, ink, ink),
            width=int(rng.integers(1, 3)),
        )
    return img


def render_cartoon(g: Geometry, rng: np.random.Generator) -> Image.Image:
    """Flat saturated fill with a thick black outline on a flat pastel background."""
    img = new_canvas(SIZE, _hsv(float(rng.random()), 0.2, 1.0))
    ImageDraw.Draw(img).polygon(g.polygon(), fill=_hsv(g.hue, 0.9, 1.0), outline=(0, 0, 0), width=3)
    return img


def render_noisy(g: Geometry, rng: np.random.Generator) -> Image.Image:
    """A photo-style rendering under strong Gaussian pixel noise."""
    return add_gaussian_noise(render_photo(g, rng), rng, PHOTO_NOISE_SIGMA)


SHAPE_STYLES: dict[str, Callable[[Geometry, np.random.Generator], Image.Image]] = {
    "photo": render_photo,
    "sketch": render_sketch,
    "cartoon": render_cartoon,
    "noisy": render_noisy,
}


def _framed(ink: np.ndarray) -> np.ndarray:
    """A 48x48 scan's ink centred in a 64x64 frame, so rotations do not clip the strokes."""
    margin = (SIZE - DIGIT_SIZE) // 2
    return np.pad(ink, margin)


def _clean_scan(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    return ink_on(_framed(ink), (0, 0, 0))


def _rotated_scan(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    angle = float(rng.uniform(*ROTATION_DEGREES)) * (1 if rng.random() < 0.5 else -1)
    return _clean_scan(ink, rng).rotate(angle, Image.Resampling.BILINEAR, fillcolor=(0, 0, 0))


def _coloured_scan(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    hue = float(rng.random())
    stroke_hue = hue + float(rng.uniform(0.33, 0.67))
    return ink_on(_framed(ink), _hsv(hue, 0.8, 0.6), _hsv(stroke_hue, 0.9, 1.0))


def _noisy_scan(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    return add_gaussian_noise(_clean_scan(ink, rng), rng, DIGIT_NOISE_SIGMA)


def _inverted_scan(ink: np.ndarray, rng: np.random.Generator) -> Image.Image:
    return ink_on(_framed(ink), (255, 255, 255), (0, 0, 0))


#: Styles of a grey scan (48x48 ink in [0, 1]): the digits suites' domains.
DIGIT_STYLES: dict[str, Callable[[np.ndarray, np.random.Generator], Image.Image]] = {
    "clean": _clean_scan,
    "rotated": _rotated_scan,
    "coloured": _coloured_scan,
    "noisy": _noisy_scan,
}
#: Fashion-MNIST's domains: the digit styles and the negative (dark cloth on white).
FASHION_STYLES = {
    "clean": _clean_scan,
    "rotated": _rotated_scan,
    "inverted": _inverted_scan,
    "coloured": _coloured_scan,
    "noisy": _noisy_scan,
}


def scan_ink(image: np.ndarray) -> np.ndarray:
    """A uint8 (28, 28) scan as 48x48 ink in [0, 1] (bilinear)."""
    resized = Image.fromarray(image).resize((DIGIT_SIZE, DIGIT_SIZE), Image.Resampling.BILINEAR)
    return np.asarray(resized, np.float32) / 255.0


def _geometries(kind: str, n: int, rng: np.random.Generator) -> list[Geometry]:
    return [sample_geometry(kind, rng) for _ in range(n)]


def class_indices(labels: np.ndarray, label: int, n: int, rng: np.random.Generator) -> list[int]:
    """`n` indices of images of `label` in random order (cycled if it has fewer than `n`)."""
    scans = rng.permutation(np.flatnonzero(labels == label))
    return [int(scans[i % len(scans)]) for i in range(n)]


def write_suite(
    root: Path, payloads: dict[str, list], styles: dict[str, Callable], seed: int, suite: str
) -> dict:
    """Render every (class, item) in every style under root/STYLE/CLASS/NNNN.png; returns the manifest entry."""
    counts: dict[str, dict[str, int]] = {style: {} for style in styles}
    for cls, items in payloads.items():
        for style, render in styles.items():
            rng = env_rng(seed, f"{suite}/{style}/{cls}")
            folder = root / style / cls
            folder.mkdir(parents=True, exist_ok=True)
            for i, item in enumerate(items):
                save_png(render(item, rng), folder / f"{i:04d}.png")
            counts[style][cls] = len(items)
    return {
        "domains": list(styles),
        "classes": list(payloads),
        "counts": counts,
        "image_size": SIZE,
    }


def build(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """Write both suites to `out_dir` (`n_per_env` images per class per domain); returns the manifest path."""
    n = DEFAULT_PER_CLASS if n_per_env is None else n_per_env
    shapes = {kind: _geometries(kind, n, env_rng(seed, f"shapes/{kind}")) for kind in SHAPE_KINDS}
    labels = digit_scans()[1]
    digits = {
        name: [digit_ink(i, DIGIT_SIZE) for i in class_indices(labels, d, n, env_rng(seed, f"digits/{name}"))]
        for d, name in enumerate(DIGIT_NAMES)
    }
    suites = {
        "shapes": write_suite(out_dir / "shapes", shapes, SHAPE_STYLES, seed, "shapes"),
        "digits": write_suite(out_dir / "digits", digits, DIGIT_STYLES, seed, "digits"),
    }
    manifest = {
        "benchmark": "domains",
        "seed": seed,
        "layout": "SUITE/DOMAIN/CLASS/NNNN.png",
        "paired": "image NNNN of a class shows the same shape geometry / digit scan in every domain",
        "suites": suites,
    }
    return write_manifest(out_dir, manifest)
