"""Image loading: every image enters robustvlm through `load_image`.

`load_image` refuses what it cannot use with a `DataError` (missing, empty, truncated or
non-image files, directories, images over the pixel limit) and returns every usable image as 8-bit RGB:

| mode | conversion |
|---|---|
| RGBA, LA, PA, P with transparency | composited on a white background |
| L, P, 1, CMYK, YCbCr, ... | PIL's `convert("RGB")` |
| I;16 (and I;16B/L/N) | value / 257, so 65535 -> 255 |
| I (32-bit integer) | taken as 16-bit data (how 16-bit files decode): clipped to 0..65535, / 257 |
| F (float) | values in [0, 1] scaled by 255 when the maximum is <= 1, else clipped to 0..255 |
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Callable

import numpy as np
from PIL import Image, UnidentifiedImageError

from robustvlm.errors import DataError

DEFAULT_MAX_PIXELS = 40_000_000

_WHITE = (255, 255, 255, 255)


# Checks on an image path before it is opened, in this order: the first that holds is the problem.
_PATH_PROBLEMS: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda path: "\x00" in path, "the path holds a NUL byte, which no file name can"),
    (os.path.isdir, "is a directory, not an image file"),
    (lambda path: not os.path.isfile(path), "file not found"),
    (lambda path: os.path.getsize(path) == 0, "file is empty (0 bytes)"),
)


def _reference_problem(ref: str | bytes) -> str | None:
    """Why `ref` cannot be an image before it is opened (empty bytes, a bad path), or None."""
    if isinstance(ref, bytes):
        return None if ref else "empty image data"
    return next((reason for check, reason in _PATH_PROBLEMS if check(ref)), None)


def load_image(
    ref: str | bytes | None,
    *,
    source: str = "",
    record: str | int | None = None,
    record_id: str | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> Image.Image:
    """Open an image path or encoded bytes, fully decoded, as an 8-bit RGB PIL image.

    The pixel count (width x height) is checked against `max_pixels` from the header,
    before any pixel data is decoded. A record without an image (`ref` None) is a DataError too.
    Raises DataError naming `source`, `record` and
    `record_id` (see DataError) when the image cannot be used.
    """
    name = "<bytes>" if isinstance(ref, bytes) else str(ref).replace("\x00", "\\x00")

    def fail(reason: str) -> DataError:
        return DataError(f"image {name}: {reason}", source or None, record, record_id)

    if ref is None:
        raise fail("the record has no image")
    problem = _reference_problem(ref)
    if problem is not None:
        raise fail(problem)
    return to_rgb(_decode(ref, max_pixels, fail))


def _decode(ref: str | bytes, max_pixels: int, fail: Callable[[str], DataError]) -> Image.Image:
    """The image at a path or in encoded bytes, fully decoded in its own mode, within `max_pixels`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(ref) if isinstance(ref, bytes) else ref)
            if img.width * img.height > max_pixels:
                raise fail(f"{img.width}x{img.height} pixels is over the {max_pixels}-pixel limit")
            img.load()
    except DataError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise fail(f"refused as a possible decompression bomb ({exc})") from exc
    except UnidentifiedImageError as exc:
        raise fail("not an image file (unknown format)") from exc
    except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError... on broken data
        raise fail(f"cannot decode ({type(exc).__name__}: {exc}); the file may be truncated") from exc
    return img


def to_rgb(img: Image.Image) -> Image.Image:
    """Convert any PIL mode to 8-bit RGB (see the module docstring for the rules)."""
    if img.mode == "RGB":
        return img
    if img.mode.startswith("I") or img.mode == "F":
        return Image.fromarray(_to_uint8(np.asarray(img), img.mode)).convert("RGB")
    has_alpha = img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in img.info
    if has_alpha:
        rgba = img.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, _WHITE), rgba).convert("RGB")
    return img.convert("RGB")


def _to_uint8(pixels: np.ndarray, mode: str) -> np.ndarray:
    """Scale one channel of 16-bit, 32-bit integer or float pixels to uint8 (shape kept)."""
    values = pixels.astype(np.float64)
    if mode == "F":
        values = np.nan_to_num(values)
        scale = 255.0 if values.size and values.max() <= 1.0 else 1.0
        return np.clip(np.rint(values * scale), 0, 255).astype(np.uint8)
    return np.rint(np.clip(values, 0, 65535) / 257.0).astype(np.uint8)
