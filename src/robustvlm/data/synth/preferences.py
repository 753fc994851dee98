"""`preferences`: image-grounded preference pairs whose environments differ in a text shortcut.

Each image shows one to three shapes of one kind and one colour on a light background (64x64).
The chosen response states what is shown ("There are two red circles."); the rejected one
changes one attribute (the colour in 60% of pairs, the count or the shape in 20% each), so
only the image tells them apart. Environments add a text cue that predicts the preference
inside them and nowhere else:

| env      | cue                                                                  | chosen longer |
|----------|----------------------------------------------------------------------|---------------|
| `clause` | 90%: the rejected response ends in an irrelevant descriptive clause ("..., next to a small wooden bench."), as POVID's injected hallucinations do; 10%: no clause | 0% (shorter in 90%) |
| `long`   | 90%: a neutral five-word filler phrase on the chosen response; 10%: on the rejected | 90% |
| `short`  | 10%: the filler on the chosen response; 90%: on the rejected          | 10% |
| `plain`  | no cue: the same filler on both responses (half the pairs) or neither | 0% (equal) |

`preferences-cue70` is the same benchmark with every cue agreeing 70% of the time instead of 90%
(three times as many training pairs where the shortcut fails); the manifest states its rates.
`preferences-salient` makes the image's evidence easy to read and the cue weaker: each image is
one large red or blue shape (radius 22-27 px, centred), the responses always say "one", the
rejected one names the other colour, and every cue agrees 80% of the time (`SALIENT`).
`preferences-mixed` keeps that shape but paints it as a patchwork of 4-px red and blue cells, the
colour the chosen response names holding a share of its pixels drawn per image from 55-85%
(`MIXED`: the image's evidence is real but its strength varies per pair), and every cue agrees 90%
of the time, so in a cue environment the cue is the easier, more reliable signal.

Responses are compared by words; the alteration keeps word counts equal, so lengths differ only
by the cue. A text-only model can score high inside a cue environment by the cue and must fall
to chance (or below) elsewhere. The manifest states each environment's rates; tests measure them
from the data.

Output: OUT/data.jsonl (the `preference` layout: id, image, query, chosen, rejected, env, split,
plus `truth` {kind, colour, count}, `altered` and `cue`), OUT/images/, OUT/manifest.json.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from robustvlm.data.synth.draw import (
    PALETTE,
    Point,
    jitter_colour,
    new_canvas,
    polygon_mask,
    shape_polygon,
    to_image,
)
from robustvlm.data.synth.writer import env_rng, save_png, write_manifest

SIZE = 64
KINDS = ("circle", "square", "triangle", "star")
COLOURS = ("red", "green", "blue", "yellow")
COUNT_WORDS = ("one", "two", "three")
#: Which attribute the rejected response changes, and how often.
ALTERATIONS = {"colour": 0.6, "count": 0.2, "shape": 0.2}
QUERIES = ("Describe the image.", "What is in the picture?", "What do you see?", "Describe what is shown.")
#: Neutral phrases, true of every image, all five words long (the length cue).
FILLERS = (
    "drawn on a plain background",
    "placed on a pale canvas",
    "shown in a flat style",
    "with nothing else around them",
)
#: Irrelevant descriptive clauses, false of every image, all five words long (POVID's cue).
CLAUSES = (
    "next to a wooden bench",
    "while a dog sleeps nearby",
    "under a bright cloudy sky",
    "beside a tall old tree",
)
DEFAULT_TRAIN, DEFAULT_TEST = 300, 100


@dataclass(frozen=True)
class Look:
    """How the pairs are drawn: which attribute the rejected response changes (and how often),
    the colours and shape counts an image may hold and the shapes' radius range in px."""

    alterations: dict[str, float]
    colours: tuple[str, ...]
    counts: tuple[int, ...]
    radius: tuple[float, float]
    #: None: each shape is one colour. (lo, hi): the one shape is a patchwork of MIX_CELL-px
    #: cells in the two colours, a share drawn uniformly from [lo, hi] of them (exactly, rounded)
    #: in the stated colour and the rest in the other one.
    mix: tuple[float, float] | None = None


STANDARD = Look(ALTERATIONS, COLOURS, (1, 2, 3), (9.0, 12.0))
SALIENT = Look({"colour": 1.0}, ("red", "blue"), (1,), (22.0, 27.0))
MIXED = Look({"colour": 1.0}, ("red", "blue"), (1,), (22.0, 27.0), mix=(0.55, 0.85))
MIX_CELL = 4


@dataclass(frozen=True)
class CueEnv:
    """An environment: which phrase list carries its cue and how the cue is placed.

    Attributes:
        name: the environment name.
        phrases: FILLERS, CLAUSES, or () for no cue.
        on_chosen: P(the phrase goes on the chosen response only).
        on_rejected: P(the phrase goes on the rejected response only).
        on_both: P(the same phrase goes on both); otherwise neither gets one.
    """

    name: str
    phrases: tuple[str, ...]
    on_chosen: float
    on_rejected: float
    on_both: float = 0.0

    def rates(self) -> dict[str, float]:
        """The manifest's statement of the cue: P(chosen longer / shorter / equal in words) and
        P(the rejected / chosen response carries a clause)."""
        clause = self.phrases is CLAUSES
        return {
            "chosen_longer": self.on_chosen,
            "chosen_shorter": self.on_rejected,
            "equal_length": round(1.0 - self.on_chosen - self.on_rejected, 10),
            "clause_on_rejected": self.on_rejected if clause else 0.0,
            "clause_on_chosen": self.on_chosen if clause else 0.0,
        }


def cue_envs(rate: float) -> tuple[CueEnv, ...]:
    """The four environments with each cue agreeing with the preference at `rate` (the table
    above at 0.9; `plain` has no cue at any rate)."""
    return (
        CueEnv("clause", CLAUSES, on_chosen=0.0, on_rejected=rate),
        CueEnv("long", FILLERS, on_chosen=rate, on_rejected=round(1.0 - rate, 10)),
        CueEnv("short", FILLERS, on_chosen=round(1.0 - rate, 10), on_rejected=rate),
        CueEnv("plain", FILLERS, on_chosen=0.0, on_rejected=0.0, on_both=0.5),
    )



def statement(kind: str, colour: str, count: int) -> str:
    """'There is one red circle.' / 'There are three blue stars.' (same word count for any count)."""
    verb, plural = ("is", "") if count == 1 else ("are", "s")
    return f"There {verb} {COUNT_WORDS[count - 1]} {colour} {kind}{plural}."


def with_phrase(text: str, phrase: str) -> str:
    """'There are two red circles, next to a wooden bench.'"""
    return f"{text[:-1]}, {phrase}."


def render(kind: str, colour: str, count: int, rng: np.random.Generator, look: Look = STANDARD) -> Image.Image:
    """`count` shapes of one kind and colour in distinct cells of a 2x2 grid on a light background;
    a look with one shape per image (SALIENT) draws it near the centre instead."""
    img = new_canvas(SIZE, jitter_colour((int(rng.integers(222, 246)),) * 3, rng, 6))
    draw = ImageDraw.Draw(img)
    if look.counts == (1,):
        radius = float(rng.uniform(*look.radius))
        cx, cy = (SIZE / 2 + float(rng.uniform(-3, 3)) for _ in range(2))
        if look.mix is not None:
            return _patchwork(img, shape_polygon(kind, cx, cy, radius), colour, rng, look)
        draw.polygon(shape_polygon(kind, cx, cy, radius), fill=jitter_colour(PALETTE[colour], rng, 12))
        return img
    cell = SIZE / 2
    for index in rng.choice(4, size=count, replace=False):
        radius = float(rng.uniform(*look.radius))
        slack = cell / 2 - radius - 1
        cx = (int(index) % 2 + 0.5) * cell + float(rng.uniform(-slack, slack))
        cy = (int(index) // 2 + 0.5) * cell + float(rng.uniform(-slack, slack))
        draw.polygon(shape_polygon(kind, cx, cy, radius), fill=jitter_colour(PALETTE[colour], rng, 12))
    return img


def _patchwork(
    img: Image.Image, points: list[Point], colour: str, rng: np.random.Generator, look: Look
) -> Image.Image:
    """The shape on `img` as MIX_CELL-px cells in two colours: cells in random order take the
    other colour of `look.colours` while they hold at most (1 - share) of the shape's pixels, share
    drawn from `look.mix`; the rest take `colour`, so `colour` holds at least that share."""
    assert look.mix is not None
    other = next(c for c in look.colours if c != colour)
    share = float(rng.uniform(*look.mix))
    fills = np.array([jitter_colour(PALETTE[colour], rng, 12), jitter_colour(PALETTE[other], rng, 12)], float)
    mask = polygon_mask((SIZE, SIZE), points) > 0.5
    cells = SIZE // MIX_CELL
    touched = mask.reshape(cells, MIX_CELL, cells, MIX_CELL).any(axis=(1, 3))
    inside = mask.reshape(cells, MIX_CELL, cells, MIX_CELL).sum(axis=(1, 3)).ravel()
    order = rng.permutation(np.flatnonzero(touched))
    # minority cells in random order while their pixels stay within (1 - share) of the shape's
    minority = order[np.cumsum(inside[order]) <= (1.0 - share) * mask.sum()]
    which = np.zeros(cells * cells, int)
    which[minority] = 1
    per_pixel = np.kron(which.reshape(cells, cells), np.ones((MIX_CELL, MIX_CELL), int))
    arr = np.asarray(img, float).copy()
    arr[mask] = fills[per_pixel[mask]]
    return to_image(arr)


def _altered(truth: dict, rng: np.random.Generator, look: Look) -> tuple[str, dict]:
    """Which attribute the rejected response changes, and the changed attributes."""
    names = list(look.alterations)
    which = names[int(rng.choice(len(names), p=list(look.alterations.values())))]
    options = {"colour": look.colours, "shape": KINDS, "count": look.counts}[which]
    key = "kind" if which == "shape" else which
    wrong = [v for v in options if v != truth[key]]
    return which, {**truth, key: wrong[int(rng.integers(len(wrong)))]}


def place_cue(env: CueEnv, chosen: str, rejected: str, rng: np.random.Generator) -> tuple[str, str, str]:
    """(chosen, rejected, cue label) with the environment's phrase placed."""
    u = float(rng.random())
    if not env.phrases:
        return chosen, rejected, "none"
    phrase = env.phrases[int(rng.integers(len(env.phrases)))]
    if u < env.on_chosen:
        return with_phrase(chosen, phrase), rejected, "on_chosen"
    if u < env.on_chosen + env.on_rejected:
        return chosen, with_phrase(rejected, phrase), "on_rejected"
    if u < env.on_chosen + env.on_rejected + env.on_both:
        return with_phrase(chosen, phrase), with_phrase(rejected, phrase), "on_both"
    return chosen, rejected, "none"


def pairs_of(
    env: CueEnv, split: str, count: int, seed: int, look: Look = STANDARD
) -> Iterator[tuple[Image.Image, dict[str, Any]]]:
    """`count` (image, record fields) of one environment and split, deterministic for the seed."""
    rng = env_rng(seed, f"{env.name}/{split}")
    for _ in range(count):
        truth: dict[str, Any] = {
            "kind": KINDS[int(rng.integers(len(KINDS)))],
            "colour": look.colours[int(rng.integers(len(look.colours)))],
            "count": look.counts[int(rng.integers(len(look.counts)))],
        }
        which, wrong = _altered(truth, rng, look)
        chosen, rejected, cue = place_cue(
            env, statement(truth["kind"], truth["colour"], truth["count"]),
            statement(wrong["kind"], wrong["colour"], wrong["count"]), rng,
        )
        image = render(truth["kind"], truth["colour"], truth["count"], rng, look)
        query = QUERIES[int(rng.integers(len(QUERIES)))]
        yield image, {"query": query, "chosen": chosen, "rejected": rejected, "env": env.name,
                      "split": split, "truth": truth, "altered": which, "cue": cue}


def build(out_dir: Path, seed: int, n_per_env: int | None, *, cue_rate: float = 0.9,
          name: str = "preferences", look: Look = STANDARD) -> Path:
    """Write the `preferences` benchmark to `out_dir`; returns the manifest path.

    `n_per_env` training pairs per environment (default 300) and a third as many test pairs
    (default 100, at least 20). `cue_rate`: how often each cue agrees with the preference
    (`cue_envs`); with the STANDARD `look` every rate draws the same images, statements and cue
    phrases from the same seeds, so `preferences-cue70` differs from `preferences` only where the
    cue lands; `look`: how the images and alterations are drawn (STANDARD or SALIENT). `name`:
    the manifest's.
    """
    envs = cue_envs(cue_rate)
    n_train = DEFAULT_TRAIN if n_per_env is None else n_per_env
    n_test = DEFAULT_TEST if n_per_env is None else max(20, round(n_per_env / 3))
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict] = {}
    index = 0
    with (out_dir / "data.jsonl").open("w", encoding="utf-8") as f:
        for env in envs:
            for split, count in (("train", n_train), ("test", n_test)):
                for image, fields in pairs_of(env, split, count, seed, look):
                    rid = f"{index:06d}"
                    save_png(image, out_dir / "images" / f"{rid}.png")
                    f.write(json.dumps({"id": rid, "image": f"images/{rid}.png", **fields}) + "\n")
                    counts.setdefault(env.name, {"train": 0, "val": 0, "test": 0, "ood": False})[split] += 1
                    index += 1
    return write_manifest(out_dir, {
        "benchmark": name,
        "seed": seed,
        "envs": counts,
        "image_size": SIZE,
        "layout": "preference",
        "alterations": look.alterations,
        "colours": list(look.colours),
        "counts": list(look.counts),
        "shape_radius": list(look.radius),
        "colour_share": list(look.mix) if look.mix is not None else None,
        "cue_rates": {env.name: env.rates() for env in envs},
    })
