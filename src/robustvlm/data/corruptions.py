"""ImageNet-C corruptions at five severities (Hendrycks & Dietterich 2019), for any RGB image.

Library choice: `imagecorruptions` 1.1.2 (the `[corruptions]` extra), the ImageNet-C authors'
code packaged for images of any size (at least 32x32), with its severity table: each corruption's
five parameter sets are those of ImageNet-C's `make_imagenet_c.py`. `albumentations` 2.0.8 is
maintained, but it has no severity table and its transforms are not ImageNet-C's definitions (its
noise, blur and weather transforms take other parameters), so a suite built on it would have to
write the table and the definitions by hand; `imagecorruptions` has both.

Where `imagecorruptions` 1.1.2 breaks on today's libraries, this module repairs the call, not the
definition:

- it imports `pkg_resources` (gone from setuptools 81+) for one function, `resource_filename`
  (the frost pictures' paths): a stand-in with that one function is put in place while the
  library is imported, and only when `pkg_resources` is missing;
- `glass_blur` and `gaussian_blur` pass `multichannel=True` to scikit-image's `gaussian`, which
  scikit-image 0.19+ spells `channel_axis=-1`; `fog` builds its plasma fractal with `np.float_`,
  removed in NumPy 2.0. These three are re-implemented here line for line as the library defines
  them, with those two spellings changed (tests compare them with the library's own functions run
  under a compatibility shim: equal arrays).

Randomness: the library draws from NumPy's legacy global generator. `corrupt` seeds it from its
`seed` argument and restores its previous state afterwards, so a corrupted image is a function of
(image, corruption, severity, seed) and callers' random streams are untouched.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.extras import require

#: The 15 corruptions of the ImageNet-C benchmark, in its order (noise, blur, weather, digital).
COMMON = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
)
#: ImageNet-C's 4 held-out validation corruptions.
VALIDATION = ("speckle_noise", "gaussian_blur", "spatter", "saturate")
SEVERITIES = (1, 2, 3, 4, 5)
MIN_SIDE = 32  # the library's smallest image side

#: glass_blur's (sigma, max_delta, iterations) and fog's (strength, wibble decay) per severity,
#: and gaussian_blur's sigma: imagecorruptions 1.1.2's (= ImageNet-C's) tables.
GLASS_BLUR: tuple[tuple[float, int, int], ...] = ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2))
FOG = ((1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4))
GAUSSIAN_BLUR = (1, 2, 3, 4, 6)


def _resource_filename(package: str, name: str) -> str:
    """`pkg_resources.resource_filename`: the path of `name` inside an imported package."""
    return str(Path(sys.modules[package].__file__ or "").parent / name)


def library() -> Any:
    """The `imagecorruptions` module (MissingExtra without the `[corruptions]` extra)."""
    require("corruptions", "ImageNet-C corruptions")
    if "imagecorruptions" in sys.modules or importlib.util.find_spec("pkg_resources") is not None:
        return _import_quietly()
    shim = types.ModuleType("pkg_resources")
    shim.resource_filename = _resource_filename  # type: ignore[attr-defined]
    sys.modules["pkg_resources"] = shim
    try:
        return _import_quietly()
    finally:
        del sys.modules["pkg_resources"]


def _import_quietly() -> Any:
    """Import `imagecorruptions` without its DeprecationWarning (`scipy.ndimage.interpolation`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module("imagecorruptions")


def _gaussian(x: np.ndarray, sigma: float) -> np.ndarray:
    from skimage.filters import gaussian

    return np.asarray(gaussian(x, sigma=sigma, channel_axis=-1))


def gaussian_blur(x: Image.Image, severity: int = 1) -> np.ndarray:
    """ImageNet-C's gaussian_blur: a Gaussian of sigma GAUSSIAN_BLUR[severity - 1] px per channel."""
    blurred = _gaussian(np.array(x) / 255.0, GAUSSIAN_BLUR[severity - 1])
    return np.clip(blurred, 0, 1) * 255


def glass_blur(x: Image.Image, severity: int = 1) -> np.ndarray:
    """ImageNet-C's glass_blur: blur, swap each pixel with a random neighbour within max_delta
    (`iterations` sweeps, bottom-right to top-left), blur again."""
    sigma, delta, iterations = GLASS_BLUR[severity - 1]
    arr = (_gaussian(np.array(x) / 255.0, sigma) * 255).astype(np.uint8)  # the library's np.uint8(...)
    height, width = arr.shape[:2]
    for _ in range(iterations):
        for h in range(height - delta, delta, -1):
            for w in range(width - delta, delta, -1):
                dx, dy = np.random.randint(-delta, delta, size=(2,))
                hp, wp = h + dy, w + dx
                arr[h, w], arr[hp, wp] = arr[hp, wp], arr[h, w]
    return np.clip(_gaussian(arr / 255.0, sigma), 0, 1) * 255


def plasma_fractal(mapsize: int = 256, wibbledecay: float = 3) -> np.ndarray:
    """ImageNet-C's diamond-square height map [mapsize, mapsize] in [0, 1] (float64)."""
    maparray = np.empty((mapsize, mapsize), dtype=np.float64)
    maparray[0, 0] = 0
    stepsize, wibble = mapsize, 100.0
    while stepsize >= 2:
        half = stepsize // 2
        corners = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squares = corners + np.roll(corners, shift=-1, axis=0)
        squares += np.roll(squares, shift=-1, axis=1)
        maparray[half:mapsize:stepsize, half:mapsize:stepsize] = squares / 4 + wibble * np.random.uniform(
            -wibble, wibble, squares.shape)
        centres = maparray[half:mapsize:stepsize, half:mapsize:stepsize]
        corners = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        across = (centres + np.roll(centres, 1, axis=0)) + (corners + np.roll(corners, -1, axis=1))
        maparray[0:mapsize:stepsize, half:mapsize:stepsize] = across / 4 + wibble * np.random.uniform(
            -wibble, wibble, across.shape)
        down = (centres + np.roll(centres, 1, axis=1)) + (corners + np.roll(corners, -1, axis=0))
        maparray[half:mapsize:stepsize, 0:mapsize:stepsize] = down / 4 + wibble * np.random.uniform(
            -wibble, wibble, down.shape)
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min()
    return maparray / maparray.max()


def fog(x: Image.Image, severity: int = 1) -> np.ndarray:
    """ImageNet-C's fog: a plasma fractal of strength c0 (wibble decay c1) added, then rescaled."""
    strength, decay = FOG[severity - 1]
    arr = np.array(x) / 255.0
    max_val = arr.max()
    side = 1 << (int(max(arr.shape)) - 1).bit_length()
    arr += strength * plasma_fractal(mapsize=side, wibbledecay=decay)[: arr.shape[0], : arr.shape[1]][..., None]
    return np.clip(arr * max_val / (max_val + strength), 0, 1) * 255


#: The re-implemented corruptions (module doc); every other name is the library's function.
REPAIRED: dict[str, Callable[[Image.Image, int], np.ndarray]] = {
    "gaussian_blur": gaussian_blur, "glass_blur": glass_blur, "fog": fog,
}


def corruption(name: str) -> Callable[[Image.Image, int], Any]:
    """The function of corruption `name` (one of COMMON or VALIDATION)."""
    if name not in (*COMMON, *VALIDATION):
        raise ConfigError(f"unknown corruption '{name}'; known: {', '.join((*COMMON, *VALIDATION))}")
    return REPAIRED.get(name) or library().corruption_dict[name]


@contextmanager
def seeded_global_numpy(seed: int) -> Iterator[None]:
    """NumPy's legacy global generator seeded with `seed` inside, its earlier state restored after."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def corrupt(image: Image.Image, name: str, severity: int, seed: int) -> Image.Image:
    """`image` (any mode, each side >= 32 px) as RGB under corruption `name` at `severity` (1-5),
    its random draws seeded by `seed` (0 <= seed < 2**32); the library's `corrupt` cast (uint8
    of the float result, which truncates)."""
    if severity not in SEVERITIES:
        raise ConfigError(f"corruption severity must be one of {SEVERITIES}, got {severity}")
    if min(image.size) < MIN_SIDE:
        raise ConfigError(f"ImageNet-C corruptions need images of at least {MIN_SIDE}x{MIN_SIDE} px, got "
                          f"{image.size[0]}x{image.size[1]}")
    function = corruption(name)
    with seeded_global_numpy(seed):
        out = function(image.convert("RGB"), severity)
    return Image.fromarray(np.uint8(out), "RGB")
