"""Linear unit-test generators against their definitions (Aubin et al. 2021)."""

from __future__ import annotations

import numpy as np
import pytest

from robustvlm.data.synth.linear_unit_tests import make_unit_test
from robustvlm.errors import ConfigError

N = 40_000


def test_example1_moments_follow_the_definition():
    problem = make_unit_test("Example1", seed=3)
    d = problem.dim_inv
    for split in ("train", "test"):
        for sigma, env in zip((0.1, 1.5, 2.0), problem.sample(split, N)):
            x, z, target = env.inputs[:, :d], env.inputs[:, d:], env.targets
            assert x.std(0) == pytest.approx(np.full(d, sigma), rel=0.03)
            coef, *_ = np.linalg.lstsq(x, target, rcond=None)  # E[sum(y) | x] = x W_xy 1
            assert coef == pytest.approx(problem.w_xy.sum(1), abs=0.05 / sigma)
            assert np.var(target - x @ coef) == pytest.approx(d * sigma**2, rel=0.05)
            cov_xz = (x - x.mean(0)).T @ (z - z.mean(0)) / N  # sigma^2 W_xy W_yz in training
            expected = sigma**2 * problem.w_xy @ problem.w_yz if split == "train" else 0 * cov_xz
            assert cov_xz == pytest.approx(
                expected, abs=4 * sigma * np.sqrt(1 + sigma**2) / np.sqrt(N)
            )


def test_example2_groups_and_labels_follow_the_definition():
    problem = make_unit_test("Example2", seed=4)
    d = problem.dim_inv
    for (p, s), env, shuffled in zip(
        problem.envs, problem.sample("train", N), problem.sample("test", N)
    ):
        x_inv, x_spu, label = env.inputs[:, :d], env.inputs[:, d:], env.targets
        animal = np.sign(x_inv.mean(1))
        assert np.array_equal(label, (x_inv.sum(1) > 0).astype(float))
        assert np.abs(x_inv).mean() == pytest.approx(0.01, rel=0.05)  # the animal is 100x fainter
        assert (animal > 0).mean() == pytest.approx(s, abs=0.01)  # share of cows
        agree = (np.sign(x_spu.mean(1)) == animal).mean()
        assert agree == pytest.approx(p, abs=0.005)  # cow on grass / camel on sand
        shuffled_agree = (
            np.sign(shuffled.inputs[:, d:].mean(1)) == np.sign(shuffled.inputs[:, :d].mean(1))
        ).mean()
        grass = s * p + (1 - s) * (1 - p)  # P(background = grass)
        assert shuffled_agree == pytest.approx(s * grass + (1 - s) * (1 - grass), abs=0.01)


def test_example3_class_means_follow_the_definition():
    problem = make_unit_test("Example3", n_envs=4, seed=5)
    d = problem.dim_inv
    for mu, env, shuffled in zip(
        problem.spurious_means, problem.sample("train", N), problem.sample("test", N)
    ):
        x_inv, x_spu, label = env.inputs[:, :d], env.inputs[:, d:], env.targets
        assert label.mean() == 0.5
        for cls, sign in ((0, 1.0), (1, -1.0)):
            rows = label == cls
            assert x_inv[rows].mean(0) == pytest.approx(np.full(d, 0.1 * sign), abs=0.005)
            assert x_spu[rows].mean(0) == pytest.approx(sign * mu, abs=0.005)
            assert x_spu[rows].std(0) == pytest.approx(np.full(problem.dim_spu, 0.1), rel=0.03)
        spu = shuffled.inputs[:, d:]
        assert spu[shuffled.targets == 0].mean(0) == pytest.approx(
            spu[shuffled.targets == 1].mean(0), abs=0.03
        )


@pytest.mark.parametrize("name", ["Example1", "Example2", "Example3"])
def test_scrambled_examples_are_an_orthogonal_map_of_the_plain_ones(name):
    plain, scrambled = make_unit_test(name, seed=6), make_unit_test(name + "s", seed=6)
    s = scrambled.scramble
    assert s @ s.T == pytest.approx(np.eye(plain.dim), abs=1e-12)
    for split in ("train", "test"):
        for a, b in zip(plain.sample(split, 500, stream=1), scrambled.sample(split, 500, stream=1)):
            assert b.inputs @ s.T == pytest.approx(a.inputs, abs=1e-12)
            assert np.array_equal(a.targets, b.targets)


def test_sampling_is_seeded_and_options_are_checked():
    a = make_unit_test("Example2", n_envs=5, dim_inv=2, dim_spu=3, seed=7)
    assert [e.inputs.shape for e in a.sample("train", 10)] == [(10, 5)] * 5
    assert all(0.9 <= p <= 1 and 0.3 <= s <= 0.7 for p, s in a.envs)
    same = make_unit_test("Example2", n_envs=5, dim_inv=2, dim_spu=3, seed=7)
    assert np.array_equal(a.sample("train", 10)[4].inputs, same.sample("train", 10)[4].inputs)
    assert not np.array_equal(
        a.sample("train", 10)[0].inputs, a.sample("train", 10, stream=1)[0].inputs
    )
    scales = make_unit_test("Example1", n_envs=6, seed=1).scales
    assert list(scales[:3]) == [0.1, 1.5, 2.0] and all(0.01 <= v <= 10 for v in scales[3:])
    with pytest.raises(ConfigError, match="n_envs >= 2"):
        make_unit_test("Example3", n_envs=1)
    with pytest.raises(ConfigError, match="unknown linear unit test"):
        make_unit_test("Example4")
