"""Image loading: every image enters robustvlm through `load_image`."""

from __future__ import annotations

import io

from PIL import Image

from robustvlm.errors import DataError

DEFAULT_MAX_PIXELS = 40_000_000


def load_image(
    ref: str | bytes,
    *,
    source: str = "",
    record: str | int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> Image.Image:
    """Open an image path or encoded bytes as an RGB PIL image.

    Raises DataError naming `source` and `record` when the image cannot be used.
    """
    try:
        img = Image.open(io.BytesIO(ref) if isinstance(ref, bytes) else ref)
        if img.width * img.height > max_pixels:
            raise DataError(f"image is {img.width}x{img.height}, over the {max_pixels}-pixel limit", source, record)
        img.load()
    except DataError:
        raise
    except Exception as exc:  # PIL raises many types
        raise DataError(f"cannot read image {ref if isinstance(ref, str) else '<bytes>'}: {exc}", source, record) from exc
    return img.convert("RGB")
