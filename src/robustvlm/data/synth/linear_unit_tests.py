"""The linear unit tests of invariance (Aubin, Słowik, Arjovsky, Bottou, Lopez-Paz, 2021).

Six small problems whose invariant solution is known. Every example has `dim_inv` invariant
and `dim_spu` spurious input dimensions and `n_envs` environments. In the training split the
spurious dimensions carry information about the target whose strength changes from one
environment to the next; in the test split the spurious block is shuffled across the rows
(each row keeps its invariant part and gets another row's spurious part), so only the
invariant dimensions still predict the target:

- Example1 (regression, cause and effect with heteroskedastic noise): environment e has a
  scale sigma_e (0.1, 1.5, 2 for the first three, 10^U(-2, 1) for further ones);
  x ~ N(0, sigma_e^2 I), y = x W_xy + N(0, sigma_e^2 I) (both dim_inv wide),
  z = y W_yz + N(0, I) (dim_spu wide), W_xy ~ N(0, 1) / dim_inv, W_yz ~ N(0, 1) / dim_spu;
  inputs [x, z], target sum(y). The invariant regression E[target | x] = x W_xy 1 has mean
  squared error dim_inv * sigma_e^2 in environment e.
- Example2 (classification, "cows and camels"): environment e has (p_e, s_e) = (0.95, 0.3),
  (0.97, 0.5), (0.99, 0.7), then U(0.9, 1) x U(0.3, 0.7). An animal (cow: +1, camel: -1 in
  every invariant dimension) appears on its usual background (cow on grass: +1, camel on sand:
  -1 in every spurious dimension) with probability p_e; cows make up a share s_e. Each block
  gets N(0, 0.1) noise, and the invariant block is then scaled by 0.01 (the animal is 100x
  fainter than the background). Label 1[sum of the invariant inputs > 0].
- Example3 (classification, small invariant margin): environment e draws a spurious mean
  mu_e ~ N(0, I); half the rows are class 0 with invariant mean +0.1 and spurious mean mu_e,
  half class 1 with -0.1 and -mu_e, all with N(0, 0.01) noise per dimension.
- Example1s, Example2s, Example3s: the same, with the inputs multiplied by a random orthogonal
  matrix (QR of a Gaussian), so no single input dimension is invariant or spurious.

Everything is drawn with numpy from one seed: the problem (weights, environment parameters,
scramble) from `seed`, the rows of each split and environment from their own stream.
Written from the definitions in the authors' release (facebookresearch/InvarianceUnitTests,
`scripts/datasets.py`, MIT).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from robustvlm.errors import ConfigError

Task = Literal["regression", "classification"]
Split = Literal["train", "test"]

EXAMPLES = ("Example1", "Example1s", "Example2", "Example2s", "Example3", "Example3s")
EXAMPLE1_SCALES = (0.1, 1.5, 2.0)
EXAMPLE2_ENVS = ((0.95, 0.3), (0.97, 0.5), (0.99, 0.7))
EXAMPLE2_FOREGROUND_SCALE = 1e-2
EXAMPLE3_MARGIN = 0.1
EXAMPLE3_NOISE = 0.1
NOISE_SD = 1.0 / np.sqrt(10.0)
"""sd of Example2's per-dimension noise (variance 0.1)."""


@dataclass(frozen=True)
class EnvSample:
    """Rows of one environment.

    Attributes:
        name: "E0", "E1", ...
        inputs: [n, dim_inv + dim_spu] float64 (scrambled for the "s" examples).
        targets: [n] float64: real values (regression) or 0.0 / 1.0 (classification).
    """

    name: str
    inputs: np.ndarray
    targets: np.ndarray


class LinearUnitTest:
    """One drawn problem: its fixed parameters, and a sampler of its environments.

    Args:
        n_envs: number of environments (>= 2).
        dim_inv, dim_spu: invariant (>= 1) and spurious (>= 0) input dimensions.
        scrambled: multiply the inputs by a random orthogonal matrix.
        seed: seed of the problem's parameters.
    """

    name: str
    task: Task

    def __init__(self, *, n_envs: int, dim_inv: int, dim_spu: int, scrambled: bool, seed: int):
        if n_envs < 2 or dim_inv < 1 or dim_spu < 0:
            raise ConfigError(
                f"{self.name}: need n_envs >= 2, dim_inv >= 1 and dim_spu >= 0; "
                f"got n_envs={n_envs}, dim_inv={dim_inv}, dim_spu={dim_spu}"
            )
        self.n_envs, self.dim_inv, self.dim_spu = n_envs, dim_inv, dim_spu
        self.seed = seed
        rng = np.random.default_rng([seed, 0])
        self.draw_parameters(rng)
        dim = dim_inv + dim_spu
        self.scramble = np.linalg.qr(rng.standard_normal((dim, dim)))[0] if scrambled else np.eye(dim)

    @property
    def dim(self) -> int:
        return self.dim_inv + self.dim_spu

    @property
    def env_names(self) -> list[str]:
        return [f"E{e}" for e in range(self.n_envs)]

    def draw_parameters(self, rng: np.random.Generator) -> None:
        """Draw the problem's fixed parameters (weights, environment parameters)."""
        raise NotImplementedError

    def sample_env(self, env: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n unscrambled training-split rows of environment `env`: ([n, dim] [inv, spu], [n])."""
        raise NotImplementedError

    def sample(self, split: Split, n: int, stream: int = 0) -> list[EnvSample]:
        """n rows of every environment in `split`, from the rows' own random stream.

        Args:
            split: "train" (spurious inputs informative) or "test" (spurious block shuffled
                across rows).
            n: rows per environment.
            stream: which independent draw of this split (e.g. 0 for training data, 1 for
                validation data): the same (seed, split, stream) gives the same rows.
        """
        samples = []
        for env, name in enumerate(self.env_names):
            rng = np.random.default_rng([self.seed, 1, split == "test", stream, env])
            x, y = self.sample_env(env, n, rng)
            if split == "test":
                x[:, self.dim_inv :] = x[rng.permutation(n), self.dim_inv :]
            samples.append(EnvSample(name, x @ self.scramble, y))
        return samples


class Example1(LinearUnitTest):
    """Regression: cause x and effect z of the target, heteroskedastic noise."""

    name, task = "Example1", "regression"

    def draw_parameters(self, rng: np.random.Generator) -> None:
        extra = 10.0 ** rng.uniform(-2, 1, size=max(0, self.n_envs - len(EXAMPLE1_SCALES)))
        self.scales = np.concatenate([EXAMPLE1_SCALES, extra])[: self.n_envs]
        self.w_xy = rng.standard_normal((self.dim_inv, self.dim_inv)) / self.dim_inv
        self.w_yz = rng.standard_normal((self.dim_inv, self.dim_spu)) / max(1, self.dim_spu)

    def sample_env(self, env: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        sigma = self.scales[env]
        x = sigma * rng.standard_normal((n, self.dim_inv))
        y = x @ self.w_xy + sigma * rng.standard_normal((n, self.dim_inv))
        z = y @ self.w_yz + rng.standard_normal((n, self.dim_spu))
        return np.concatenate([x, z], axis=1), y.sum(1)


class Example2(LinearUnitTest):
    """Classification: cows and camels, a faint animal on an informative background."""

    name, task = "Example2", "classification"

    def draw_parameters(self, rng: np.random.Generator) -> None:
        extra = self.n_envs - len(EXAMPLE2_ENVS)
        drawn = zip(rng.uniform(0.9, 1.0, max(0, extra)), rng.uniform(0.3, 0.7, max(0, extra)))
        self.envs = (list(EXAMPLE2_ENVS) + list(drawn))[: self.n_envs]

    def group_probabilities(self, env: int) -> np.ndarray:
        """[4] probabilities of (cow, grass), (cow, sand), (camel, sand), (camel, grass)."""
        p, s = self.envs[env]
        return np.array([s * p, s * (1 - p), (1 - s) * p, (1 - s) * (1 - p)])

    def sample_env(self, env: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        group = rng.choice(4, size=n, p=self.group_probabilities(env))
        animal = np.where(group < 2, 1.0, -1.0)[:, None]  # cow +1, camel -1
        background = np.where((group == 0) | (group == 3), 1.0, -1.0)[:, None]  # grass +1
        x_inv = (NOISE_SD * rng.standard_normal((n, self.dim_inv)) + animal) * EXAMPLE2_FOREGROUND_SCALE
        x_spu = NOISE_SD * rng.standard_normal((n, self.dim_spu)) + background
        return np.concatenate([x_inv, x_spu], axis=1), (x_inv.sum(1) > 0).astype(np.float64)


class Example3(LinearUnitTest):
    """Classification: a small invariant margin beside a large, environment-specific spurious one."""

    name, task = "Example3", "classification"

    def draw_parameters(self, rng: np.random.Generator) -> None:
        self.spurious_means = rng.standard_normal((self.n_envs, self.dim_spu))

    def sample_env(self, env: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        sign = np.where(np.arange(n) < n // 2, 1.0, -1.0)[:, None]  # class 0 first, then class 1
        x_inv = EXAMPLE3_NOISE * rng.standard_normal((n, self.dim_inv)) + sign * EXAMPLE3_MARGIN
        x_spu = EXAMPLE3_NOISE * rng.standard_normal((n, self.dim_spu)) + sign * self.spurious_means[env]
        return np.concatenate([x_inv, x_spu], axis=1), (sign[:, 0] < 0).astype(np.float64)


_CLASSES = {cls.name: cls for cls in (Example1, Example2, Example3)}


def make_unit_test(
    name: str, *, n_envs: int = 3, dim_inv: int = 5, dim_spu: int = 5, seed: int = 0
) -> LinearUnitTest:
    """The problem `name` (one of EXAMPLES) with its parameters drawn from `seed`."""
    if name not in EXAMPLES:
        raise ConfigError(f"unknown linear unit test {name!r}; choose one of {list(EXAMPLES)}")
    cls = _CLASSES[name.removesuffix("s")]
    return cls(
        n_envs=n_envs, dim_inv=dim_inv, dim_spu=dim_spu, scrambled=name.endswith("s"), seed=seed
    )
