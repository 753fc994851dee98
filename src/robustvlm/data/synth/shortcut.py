"""The ColoredMNIST construction shared by `spurious` and `digits`.

A binary class (0 or 1) is drawn; the answer is that class flipped with probability
LABEL_NOISE; the background colour then agrees with the *noisy* answer (class 0 <->
red, class 1 <-> green) with an environment-specific probability. The colour predicts
the answer better than the image content in training (0.9, 0.8 > 0.75) and worse at
test: `test-reversed` (0.1) punishes colour use, and `test-nocolour` (0.5) tells a
model that learned the content apart from one that learned an anti-colour rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from robustvlm.data.synth.draw import RGB, jitter_colour
from robustvlm.data.synth.writer import SplitSizes, SynthRecord, env_rng

LABEL_NOISE = 0.25
BACKGROUNDS: tuple[tuple[str, RGB], tuple[str, RGB]] = (
    ("red", (200, 40, 40)),
    ("green", (40, 160, 50)),
)


@dataclass(frozen=True)
class ColourEnv:
    """An environment: name, P(background colour agrees with the noisy answer), out-of-domain flag."""

    name: str
    agreement: float
    ood: bool


COLOUR_ENVS = (
    ColourEnv("train-0.9", 0.9, False),
    ColourEnv("train-0.8", 0.8, False),
    ColourEnv("test-reversed", 0.1, True),
    ColourEnv("test-nocolour", 0.5, True),
)


def noisy_coloured_labels(
    rng: np.random.Generator, clean: np.ndarray, *, noise: float, agreement: float
) -> tuple[np.ndarray, np.ndarray]:
    """Noisy answers and background colours for clean binary labels.

    Args:
        clean: (n,) int array of 0/1 classes.
        noise: probability that the answer is the other class.
        agreement: probability that the colour index equals the noisy answer.

    Returns:
        (noisy, colour): two (n,) int arrays of 0/1.
    """
    noisy = np.where(rng.random(clean.shape) < noise, 1 - clean, clean)
    colour = np.where(rng.random(clean.shape) < agreement, noisy, 1 - noisy)
    return noisy, colour


# (rng, n, held_out) -> (clean 0/1 labels of shape (n,), one payload per example)
Sampler = Callable[[np.random.Generator, int, bool], tuple[np.ndarray, list[Any]]]
# (payload, background colour, rng) -> image
Renderer = Callable[[Any, RGB, np.random.Generator], Image.Image]


def generate_coloured(
    seed: int,
    sizes: SplitSizes,
    *,
    answers: tuple[str, str],
    instruction: str,
    sample: Sampler,
    render: Renderer,
    describe: Callable[[Any], dict],
) -> Iterator[SynthRecord]:
    """All records of a colour-shortcut benchmark, env by env and split by split.

    `sample` draws clean classes and payloads (`held_out` is True for val/test splits,
    so samplers with a finite image pool can keep training and evaluation images
    apart); `render` draws one payload on a background; `describe` gives extra JSON
    fields per payload. Every record also stores `clean_target` and `colour`.
    """
    for env in COLOUR_ENVS:
        rng = env_rng(seed, env.name)
        for split, count in sizes.for_env(env.ood).items():
            clean, payloads = sample(rng, count, split != "train")
            noisy, colour = noisy_coloured_labels(
                rng, clean, noise=LABEL_NOISE, agreement=env.agreement
            )
            for payload, c, y, k in zip(payloads, clean, noisy, colour):
                name, rgb = BACKGROUNDS[int(k)]
                img = render(payload, jitter_colour(rgb, rng, 15), rng)
                extra = {"clean_target": answers[int(c)], "colour": name, **describe(payload)}
                yield SynthRecord(
                    img, instruction, answers[int(y)], env.name, split, env.ood, extra
                )


def manifest_fields(answers: tuple[str, str]) -> dict:
    """Manifest keys documenting the construction."""
    return {
        "answers": list(answers),
        "label_noise": LABEL_NOISE,
        "colour_of_answer": {answers[i]: BACKGROUNDS[i][0] for i in range(2)},
        "colour_agreement": {env.name: env.agreement for env in COLOUR_ENVS},
    }
