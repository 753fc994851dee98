"""Attributes of the domains digits images, and the captions and questions built from them."""

from __future__ import annotations

from robustvlm.data.loaders import load_examples
from robustvlm.data.synth.digit_attributes import (
    HUE_NAMES,
    attributes,
    caption,
    colour_name,
    question_answers,
    varying,
)


def test_colour_names():
    assert colour_name((0, 0, 0)) == "black" and colour_name((255, 0, 0)) == "red"
    assert colour_name((20, 20, 200)) == "blue" and colour_name((200, 200, 30)) == "yellow"
    assert colour_name((250, 10, 40)) == "red"  # hue wraps around


def test_attributes_follow_the_style_and_the_painted_background(domains_suite):
    examples = load_examples(domains_suite / "digits", fmt="folder", verbose=False)
    by_style = {}
    for ex in examples:
        by_style.setdefault(ex.env, []).append(attributes(ex))
    assert {a["background"] for a in by_style["clean"] + by_style["rotated"] + by_style["noisy"]} == {"black"}
    coloured = {a["background"] for a in by_style["coloured"]}
    assert coloured <= set(HUE_NAMES) and len(coloured) > 1
    assert {a["orientation"] for a in by_style["rotated"]} == {"rotated"}
    assert {a["noise"] for a in by_style["noisy"]} == {"noisy"}
    assert varying(by_style["clean"]) == ["digit"]
    assert varying(by_style["clean"] + by_style["rotated"] + by_style["coloured"]) == [
        "digit", "orientation", "background"]


def test_caption_and_questions_state_the_same_facts():
    attrs = {"digit": "seven", "orientation": "rotated", "noise": "clean", "background": "red"}
    described = ["digit", "orientation", "noise", "background"]
    assert caption(attrs, described) == "a handwritten seven, rotated, on a red background, without noise"
    assert caption(attrs, ["digit"]) == "a handwritten seven"
    assert question_answers(attrs, described) == [
        ("What digit is shown?", "seven"), ("Is the digit upright or rotated?", "rotated"),
        ("Is the image clean or noisy?", "clean"), ("What colour is the background?", "red")]
