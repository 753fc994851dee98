"""What the `domains` digits images show, from how they were generated, as captions and as
question-answer pairs (the caption-style and VQA-style task signals of the same images).

An image of the suite is one sklearn scan of a digit drawn in one style (its domain folder), so
its attributes are known from the generator:

| attribute    | question                            | answers                                        |
|--------------|-------------------------------------|------------------------------------------------|
| `digit`      | What digit is shown?                | the class folder: zero ... nine                |
| `orientation`| Is the digit upright or rotated?    | rotated in `rotated` (25-60 degrees), else upright |
| `noise`      | Is the image clean or noisy?        | noisy in `noisy` (Gaussian noise, sigma 70), else clean |
| `background` | What colour is the background?      | black, except in `coloured`: the hue of the uniform background the generator paints, read at the image's corner pixel and named (red, yellow, green, cyan, blue, magenta) |

A caption states the digit and every other attribute that varies in the image set it describes,
in one sentence: "a handwritten seven, rotated, on a black background, with noise". The
questions asked are those of the same varying attributes, so the two signals carry the same
facts about the same images: the caption all at once with the image alone as the query, the
question-answer pairs one fact per question. An attribute that never varies (e.g. the
background when no coloured image is trained on) is neither asked nor described.
"""

from __future__ import annotations

import colorsys
from collections.abc import Mapping, Sequence

import numpy as np

from robustvlm.data.images import load_image
from robustvlm.data.records import Example

QUESTIONS: dict[str, str] = {
    "digit": "What digit is shown?",
    "orientation": "Is the digit upright or rotated?",
    "noise": "Is the image clean or noisy?",
    "background": "What colour is the background?",
}
HUE_NAMES = ("red", "yellow", "green", "cyan", "blue", "magenta")
#: the zero-shot class text of a caption-trained model: the start of every caption
CAPTION_CLASS_TEMPLATE = "a handwritten {class}"


def colour_name(rgb: Sequence[int]) -> str:
    """"black" for dark colours, else the nearest of six hues (HUE_NAMES, 60 degrees apart)."""
    hue, _, value = colorsys.rgb_to_hsv(*(c / 255 for c in rgb))
    return "black" if value < 0.2 else HUE_NAMES[int(hue * 6 + 0.5) % 6]


def attributes(example: Example) -> dict[str, str]:
    """The known attributes of one image of the digits suite (see the module doc); the style is
    its environment, the digit its target."""
    style = example.env
    background = "black"
    if style == "coloured":
        assert example.image is not None  # every record of the digits suite has its image
        corner = np.asarray(load_image(example.image, source=example.source, record=example.id))[0, 0]
        background = colour_name(corner.tolist())
    return {
        "digit": example.target,
        "orientation": "rotated" if style == "rotated" else "upright",
        "noise": "noisy" if style == "noisy" else "clean",
        "background": background,
    }


def varying(all_attributes: Sequence[Mapping[str, str]]) -> list[str]:
    """The attributes (in QUESTIONS order) that take at least two values in an image set; the
    digit always counts."""
    return [name for name in QUESTIONS
            if name == "digit" or len({a[name] for a in all_attributes}) > 1]


def caption(attrs: Mapping[str, str], described: Sequence[str]) -> str:
    """One sentence stating the digit and the `described` attributes."""
    parts = [CAPTION_CLASS_TEMPLATE.replace("{class}", attrs["digit"])]
    if "orientation" in described:
        parts.append(attrs["orientation"])
    if "background" in described:
        parts.append(f"on a {attrs['background']} background")
    if "noise" in described:
        parts.append("with noise" if attrs["noise"] == "noisy" else "without noise")
    return ", ".join(parts)


def question_answers(attrs: Mapping[str, str], asked: Sequence[str]) -> list[tuple[str, str]]:
    """(question, answer) for each `asked` attribute."""
    return [(QUESTIONS[name], attrs[name]) for name in asked]
