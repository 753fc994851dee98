"""`tasks`: environments defined by task type, after the Dynamic BIRM paper's setup.

Eight in-domain sub-environments (train/val/test) in three task types and two
out-of-domain OCR environments (test only):

    general/caption, general/scene, general/list    describe a scene of 1-3 coloured shapes
    reasoning/count, reasoning/compare,              count a kind, compare two colour counts,
    reasoning/largest                                name the colour of the largest shape
    doc-chart/tallest, doc-chart/value               read a bar chart with word labels
    ocr/word, ocr/number (OOD)                       read a rendered word / number

Chart labels and OCR words come from one vocabulary and chart values are printed
as numbers, so reading rendered text is learnable in-domain; the OCR environments
ask for that skill under instructions never seen in training. Images are 128x128 RGB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from robustvlm.data.synth.draw import (
    PALETTE,
    RGB,
    TEXT_STYLES,
    font,
    jitter_colour,
    linear_gradient,
    new_canvas,
    paste_patch,
    shape_polygon,
    text_patch,
    text_width,
    to_image,
)
from robustvlm.data.synth.writer import (
    SplitSizes,
    SynthRecord,
    env_rng,
    write_instruction_benchmark,
)

SIZE = 128
GRID = 3
CELL = SIZE / GRID
KINDS = ("circle", "square", "triangle", "star")
PLURALS = {"circle": "circles", "square": "squares", "triangle": "triangles", "star": "stars"}
COLOURS = tuple(PALETTE)

# Chart labels and OCR words: one shared vocabulary of short, colour-free words.
VOCABULARY = (
    "apple", "bird", "book", "cake", "car", "cat", "cloud", "corn", "desk", "dog", "door",
    "duck", "fish", "frog", "hat", "key", "kite", "lamp", "leaf", "lion", "map", "milk",
    "moon", "nest", "owl", "pear", "pen", "rain", "ring", "rock", "rose", "salt", "ship",
    "shoe", "snow", "sock", "sun", "tent", "tree", "wolf",
)  # fmt: skip

# Bar-chart geometry (px): the value axis runs from 0 at BASELINE to CHART_MAX at PLOT_TOP.
CHART_LEFT, CHART_RIGHT, BASELINE, PLOT_TOP, CHART_MAX = 18, 126, 106, 16, 20

DEFAULT_SIZES = SplitSizes(train=200, val=20, test=40, ood_test=40)

Scene = tuple[Image.Image, str, str, dict]  # image, instruction, target, extra JSON fields


@dataclass(frozen=True)
class Shape:
    """One drawn shape: kind, colour name, centre (px), radius (px), rotation (rad)."""

    kind: str
    colour: str
    cx: float
    cy: float
    radius: float
    angle: float = 0.0

    def to_json(self) -> list:
        return [self.kind, self.colour, round(self.cx, 1), round(self.cy, 1), round(self.radius, 1)]


# ---------------------------------------------------------------- backgrounds and layout


def _light(rng: np.random.Generator) -> RGB:
    """A light, nearly grey colour (channel spread <= 20), never confused with a palette colour."""
    return jitter_colour((int(rng.integers(215, 240)),) * 3, rng, 10)


def _plain(rng: np.random.Generator) -> Image.Image:
    return new_canvas(SIZE, _light(rng))


def _gradient(rng: np.random.Generator) -> Image.Image:
    return to_image(
        linear_gradient((SIZE, SIZE), _light(rng), _light(rng), float(rng.uniform(0, 2 * np.pi)))
    )


def _ruled(rng: np.random.Generator) -> Image.Image:
    """White page with grey lines on the 3x3 layout grid."""
    img = new_canvas(SIZE, (250, 250, 250))
    draw = ImageDraw.Draw(img)
    for k in range(1, GRID):
        draw.line([(k * CELL, 0), (k * CELL, SIZE)], fill=(200, 200, 200))
        draw.line([(0, k * CELL), (SIZE, k * CELL)], fill=(200, 200, 200))
    return img


def _cell_centre(
    rng: np.random.Generator, col: int, row: int, radius: float
) -> tuple[float, float]:
    slack = max(0.0, CELL / 2 - radius - 2)
    return (
        (col + 0.5) * CELL + float(rng.uniform(-slack, slack)),
        (row + 0.5) * CELL + float(rng.uniform(-slack, slack)),
    )


def _scatter(
    rng: np.random.Generator, specs: list[tuple[str, str]], rotate: bool = False
) -> list[Shape]:
    """Place (kind, colour) pairs in distinct cells of the 3x3 grid."""
    cells = rng.choice(GRID * GRID, size=len(specs), replace=False)
    shapes = []
    for (kind, colour), cell in zip(specs, cells):
        radius = float(rng.uniform(10, 16))
        cx, cy = _cell_centre(rng, int(cell) % GRID, int(cell) // GRID, radius)
        angle = float(rng.uniform(-0.4, 0.4)) if rotate else 0.0
        shapes.append(Shape(kind, colour, cx, cy, radius, angle))
    return shapes


def _in_columns(
    rng: np.random.Generator, specs: list[tuple[str, str]], radii: list[float], rotate: bool
) -> list[Shape]:
    """Place shapes in distinct columns, left to right in the order given."""
    cols = sorted(rng.choice(GRID, size=len(specs), replace=False))
    shapes = []
    for (kind, colour), col, radius in zip(specs, cols, radii):
        cx, cy = _cell_centre(rng, int(col), int(rng.integers(GRID)), radius)
        angle = float(rng.uniform(-0.4, 0.4)) if rotate else 0.0
        shapes.append(Shape(kind, colour, cx, cy, radius, angle))
    return shapes


def _draw_shapes(img: Image.Image, shapes: list[Shape], outline: RGB | None = None) -> Image.Image:
    draw = ImageDraw.Draw(img)
    for s in shapes:
        points = shape_polygon(s.kind, s.cx, s.cy, s.radius, s.angle)
        draw.polygon(points, fill=PALETTE[s.colour], outline=outline, width=2 if outline else 1)
    return img


def _distinct_specs(rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
    """`n` distinct (kind, colour) pairs."""
    pairs = [(k, c) for k in KINDS for c in COLOURS]
    return [pairs[i] for i in rng.choice(len(pairs), size=n, replace=False)]


def _caption(shapes: list[Shape]) -> str:
    """'a red circle', 'a red circle and an orange square', 'a, b and c'."""
    phrases = [f"{'an' if s.colour[0] in 'aeiou' else 'a'} {s.colour} {s.kind}" for s in shapes]
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _scene_extra(shapes: list[Shape]) -> dict:
    return {"shapes": [s.to_json() for s in shapes]}


# ---------------------------------------------------------------- general


def _few_shapes(rng: np.random.Generator, rotate: bool) -> list[Shape]:
    """1-3 distinct (kind, colour) shapes of one size, in distinct columns, left to right."""
    n = int(rng.integers(1, 4))
    return _in_columns(rng, _distinct_specs(rng, n), [float(rng.uniform(11, 17))] * n, rotate)


def general_caption(rng: np.random.Generator) -> Scene:
    shapes = _few_shapes(rng, rotate=False)
    img = _draw_shapes(_plain(rng), shapes)
    instruction = _pick(
        rng, ("Describe the image in a few words.", "Write a short caption for this image.")
    )
    return img, instruction, _caption(shapes), _scene_extra(shapes)


def general_scene(rng: np.random.Generator) -> Scene:
    shapes = _few_shapes(rng, rotate=True)
    img = _draw_shapes(_gradient(rng), shapes)
    instruction = _pick(rng, ("What do you see in this picture?", "What is shown in the image?"))
    return img, instruction, _caption(shapes), _scene_extra(shapes)


def general_list(rng: np.random.Generator) -> Scene:
    shapes = _few_shapes(rng, rotate=False)
    img = _draw_shapes(_ruled(rng), shapes, outline=(40, 40, 40))
    target = ", ".join(f"{s.colour} {s.kind}" for s in shapes)
    return img, "List the shapes from left to right.", target, _scene_extra(shapes)


# ---------------------------------------------------------------- reasoning


def reasoning_count(rng: np.random.Generator) -> Scene:
    kind = _pick(rng, KINDS)
    n_kind = int(rng.integers(1, 6))
    n_other = int(rng.integers(0, min(3, GRID * GRID - n_kind) + 1))
    others = [k for k in KINDS if k != kind]
    specs = [(kind, _pick(rng, COLOURS)) for _ in range(n_kind)]
    specs += [(_pick(rng, tuple(others)), _pick(rng, COLOURS)) for _ in range(n_other)]
    shapes = _scatter(rng, specs)
    img = _draw_shapes(_plain(rng), shapes)
    return img, f"How many {PLURALS[kind]} are there?", str(n_kind), _scene_extra(shapes)


def reasoning_compare(rng: np.random.Generator) -> Scene:
    first, second = (COLOURS[i] for i in rng.choice(len(COLOURS), size=2, replace=False))
    n_first, n_second = (int(v) for v in rng.choice(5, size=2, replace=False))
    rest = tuple(c for c in COLOURS if c not in (first, second))
    n_other = int(rng.integers(0, min(2, GRID * GRID - n_first - n_second) + 1))
    colours = [first] * n_first + [second] * n_second + [_pick(rng, rest) for _ in range(n_other)]
    shapes = _scatter(rng, [(_pick(rng, KINDS), c) for c in colours], rotate=True)
    img = _draw_shapes(_plain(rng), shapes)
    instruction = f"Are there more {first} shapes than {second} shapes?"
    return img, instruction, "yes" if n_first > n_second else "no", _scene_extra(shapes)


def reasoning_largest(rng: np.random.Generator) -> Scene:
    kind = _pick(rng, KINDS)
    n = int(rng.integers(2, 4))
    colours = [COLOURS[i] for i in rng.choice(len(COLOURS), size=n, replace=False)]
    radii = [float(r) for r in rng.choice([8.0, 12.0, 16.0, 20.0], size=n, replace=False)]
    shapes = _in_columns(rng, [(kind, c) for c in colours], radii, False)
    img = _draw_shapes(_gradient(rng), shapes)
    largest = max(shapes, key=lambda s: s.radius)
    return img, f"What colour is the largest {kind}?", largest.colour, _scene_extra(shapes)


# ---------------------------------------------------------------- doc / chart


def bar_height(value: int) -> int:
    """Drawn height (px) of a bar of `value` on the chart's value axis."""
    return round(value / CHART_MAX * (BASELINE - PLOT_TOP))


def bar_chart(labels: list[str], values: list[int], rng: np.random.Generator) -> Image.Image:
    """Vertical bar chart: value axis with ticks 0/10/20, values printed above bars, labels below."""
    img = new_canvas(SIZE, jitter_colour((248, 248, 248), rng, 6))
    draw = ImageDraw.Draw(img)
    axis = (60, 60, 60)
    for tick in (0, 10, 20):
        y = BASELINE - bar_height(tick)
        if tick and rng.random() < 0.5:
            draw.line([(CHART_LEFT + 1, y), (CHART_RIGHT, y)], fill=(215, 215, 215))
        draw.line([(CHART_LEFT - 2, y), (CHART_LEFT, y)], fill=axis)
        draw.text((CHART_LEFT - 3, y), str(tick), font=font(8), fill=axis, anchor="rm")
    draw.line([(CHART_LEFT, PLOT_TOP - 4), (CHART_LEFT, BASELINE)], fill=axis)
    draw.line([(CHART_LEFT, BASELINE), (CHART_RIGHT, BASELINE)], fill=axis)
    slot = (CHART_RIGHT - CHART_LEFT - 2) / len(values)
    single = PALETTE[_pick(rng, COLOURS)] if rng.random() < 0.5 else None
    colours = [single or PALETTE[c] for c in rng.choice(COLOURS, size=len(values), replace=False)]
    for i, (label, value, colour) in enumerate(zip(labels, values, colours)):
        centre = CHART_LEFT + 2 + (i + 0.5) * slot
        half = round(slot * 0.3)
        top = BASELINE - bar_height(value)
        draw.rectangle([round(centre) - half, top, round(centre) + half, BASELINE - 1], fill=colour)
        draw.text((centre, top - 2), str(value), font=font(9), fill=(0, 0, 0), anchor="ms")
        draw.text((centre, BASELINE + 3), label, font=font(8), fill=(0, 0, 0), anchor="mt")
    return img


def _chart(rng: np.random.Generator) -> tuple[Image.Image, list[str], list[int]]:
    n = int(rng.integers(3, 5))
    labels = [VOCABULARY[i] for i in rng.choice(len(VOCABULARY), size=n, replace=False)]
    values = [int(v) for v in rng.choice(np.arange(1, CHART_MAX + 1), size=n, replace=False)]
    return bar_chart(labels, values, rng), labels, values


def chart_tallest(rng: np.random.Generator) -> Scene:
    img, labels, values = _chart(rng)
    instruction = _pick(
        rng, ("Which label has the tallest bar?", "Which category has the highest value?")
    )
    target = labels[int(np.argmax(values))]
    return img, instruction, target, {"labels": labels, "values": values}


def chart_value(rng: np.random.Generator) -> Scene:
    img, labels, values = _chart(rng)
    i = int(rng.integers(len(labels)))
    return (
        img,
        f"What is the value of {labels[i]}?",
        str(values[i]),
        {"labels": labels, "values": values},
    )


# ---------------------------------------------------------------- OCR (out of domain)


def _text_image(text: str, rng: np.random.Generator) -> Image.Image:
    """`text` in a random size/style/colour at a random position; dark-on-light or light-on-dark."""
    dark_bg = rng.random() < 0.25
    img = _gradient(rng) if rng.random() < 0.5 else _plain(rng)
    if dark_bg:
        img = Image.eval(img, lambda v: 255 - v)
    ink = jitter_colour((235, 235, 235) if dark_bg else (25, 25, 25), rng, 20)
    if rng.random() < 0.3:
        ink = PALETTE[_pick(rng, COLOURS)]
    style = _pick(rng, TEXT_STYLES)
    size = int(rng.integers(14, 35))
    while size > 10 and text_width(text, size) > SIZE * 0.7:
        size -= 2
    patch = text_patch(text, size, ink, style, stroke=(255, 255, 255) if not dark_bg else (0, 0, 0))
    if patch.width > SIZE - 8:
        patch = patch.resize((SIZE - 8, patch.height), Image.Resampling.BILINEAR)
    x = int(rng.integers(4, max(5, SIZE - 4 - patch.width)))
    y = int(rng.integers(4, max(5, SIZE - 4 - patch.height)))
    paste_patch(img, patch, (x, y))
    return img


def ocr_word(rng: np.random.Generator) -> Scene:
    word = _pick(rng, VOCABULARY)
    return _text_image(word, rng), "What word is written in the image?", word, {}


def ocr_number(rng: np.random.Generator) -> Scene:
    digits = int(rng.integers(1, 6))
    value = int(rng.integers(10 ** (digits - 1) if digits > 1 else 0, 10**digits))
    text = f"{value:,}" if value >= 1000 and rng.random() < 0.5 else str(value)
    return _text_image(text, rng), "What number is written in the image?", text, {}


IN_DOMAIN: dict[str, Callable[[np.random.Generator], Scene]] = {
    "general/caption": general_caption,
    "general/scene": general_scene,
    "general/list": general_list,
    "reasoning/count": reasoning_count,
    "reasoning/compare": reasoning_compare,
    "reasoning/largest": reasoning_largest,
    "doc-chart/tallest": chart_tallest,
    "doc-chart/value": chart_value,
}
OUT_OF_DOMAIN: dict[str, Callable[[np.random.Generator], Scene]] = {
    "ocr/word": ocr_word,
    "ocr/number": ocr_number,
}


def generate(seed: int, sizes: SplitSizes) -> Iterator[SynthRecord]:
    """All records, environment by environment, split by split (train, val, test)."""
    envs = [(name, fn, False) for name, fn in IN_DOMAIN.items()]
    envs += [(name, fn, True) for name, fn in OUT_OF_DOMAIN.items()]
    for env, make, ood in envs:
        rng = env_rng(seed, env)
        for split, count in sizes.for_env(ood).items():
            for _ in range(count):
                img, instruction, target, extra = make(rng)
                yield SynthRecord(img, instruction, target, env, split, ood, extra)


def build(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """Write the `tasks` benchmark to `out_dir`; returns the manifest path."""
    sizes = DEFAULT_SIZES.scaled(n_per_env)
    return write_instruction_benchmark(
        out_dir,
        "tasks",
        seed,
        generate(seed, sizes),
        image_size=SIZE,
        task_types={"in_domain": ["general", "reasoning", "doc-chart"], "ood": ["ocr"]},
        vocabulary=list(VOCABULARY),
    )
