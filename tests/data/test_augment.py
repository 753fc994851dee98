"""Varied pretraining (`data.augment`): the written rule (training ranges disjoint from every
evaluation shift's), the sampler inside its declared ranges, and the transforms themselves."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PIL import Image

from robustvlm.data import augment
from robustvlm.data.synth.domains import FASHION_STYLES, scan_ink
from robustvlm.data.synth.graded import GRADED_STYLES

IDENTITY = augment.Augmentation(zoom_excess=0.0, offset=(0.5, 0.5), rotation_degrees=0.0, tint_weight=0.0,
                                tint=(1.0, 0.0, 0.0), brightness_shift=0.0, contrast_change=0.0, blur_sigma=0.0,
                                noise_sigma=0.0, signs=(1, 1, 1), noise_seed=0)


@pytest.fixture(scope="module")
def picture() -> Image.Image:
    ink = np.zeros((48, 48), np.float32)
    ink[8:40, 16:32] = 1.0
    return FASHION_STYLES["clean"](ink, np.random.default_rng(0))


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def test_the_rule_training_ranges_miss_every_evaluation_shift_of_their_kind():
    for kind, shifts in augment.EVALUATION_RANGES.items():
        assert kind in augment.TRAINING_RANGES, kind
        for shift, interval in shifts:
            assert not _overlap(augment.TRAINING_RANGES[kind], interval), (kind, shift, interval)


def test_the_rule_names_every_evaluation_style_it_must_keep_out():
    named = {shift for shifts in augment.EVALUATION_RANGES.values() for shift, _ in shifts}
    assert {"rotated", "coloured", "inverted", "noisy"} <= named  # the fashion styles but clean
    assert {"rotated-small", "tinted", "low-contrast", "blurred", "noisier"} <= named
    assert set(GRADED_STYLES) - named == {"clean", "shifted"}  # shifted: translation at zoom 1, never drawn


def test_the_rule_would_catch_a_training_range_that_reaches_a_shift(monkeypatch):
    monkeypatch.setitem(augment.TRAINING_RANGES, "rotation_degrees", (0.0, 12.0))  # reaches rotated-small
    with pytest.raises(AssertionError):
        test_the_rule_training_ranges_miss_every_evaluation_shift_of_their_kind()


def test_every_drawn_parameter_lies_in_its_training_range_or_is_the_identity():
    rng = np.random.default_rng(0)
    draws = [augment.draw(rng) for _ in range(3000)]
    for kind, (low, high) in augment.TRAINING_RANGES.items():
        values = np.array([getattr(d, kind) for d in draws])
        applied = values[values != 0]
        assert ((applied >= low) & (applied <= high)).all(), kind
        share = len(applied) / len(values)
        assert abs(share - augment.PROBABILITY[kind]) < 0.04, (kind, share)
    # a translation only ever comes with a crop that magnifies by at least 1.05
    assert all(d.zoom_excess == 0 or d.zoom_excess >= 0.05 for d in draws)


def test_the_identity_leaves_the_picture_unchanged(picture):
    assert np.array_equal(np.asarray(augment.apply(picture, IDENTITY)), np.asarray(picture))


def test_each_step_is_the_transform_it_names(picture):
    x = np.asarray(picture, np.float64)
    brighter = augment.apply(picture, dataclasses.replace(IDENTITY, brightness_shift=0.05))
    assert np.array_equal(np.asarray(brighter), np.clip(np.rint(x + 0.05 * 255), 0, 255))
    flatter = augment.apply(picture, dataclasses.replace(IDENTITY, contrast_change=0.2, signs=(1, 1, -1)))
    mean = x.mean(axis=(0, 1), keepdims=True)
    expected = np.clip(np.rint(mean + 0.8 * (x - mean)), 0, 255)
    assert np.abs(np.asarray(flatter, np.float64) - expected).max() <= 1  # float32 arithmetic
    tinted = augment.apply(picture, dataclasses.replace(IDENTITY, tint_weight=0.2, tint=(1.0, 0.5, 0.0)))
    expected = np.clip(np.rint(0.8 * x + 0.2 * x * np.array([1.0, 0.5, 0.0])), 0, 255)
    assert np.abs(np.asarray(tinted, np.float64) - expected).max() <= 1
    turned = augment.apply(picture, dataclasses.replace(IDENTITY, rotation_degrees=5.0, signs=(-1, 1, 1)))
    assert np.array_equal(np.asarray(turned), np.asarray(picture.rotate(-5.0, Image.Resampling.BILINEAR)))
    zoomed = augment.apply(picture, dataclasses.replace(IDENTITY, zoom_excess=0.25, offset=(0.0, 1.0)))
    # crop side 64 / 1.25 = 51.2 at the left edge, bottom: the picture's columns 0-51.2, rows 12.8-64
    box = (0.0, 12.8, 51.2, 64.0)
    assert np.array_equal(np.asarray(zoomed), np.asarray(picture.resize((64, 64), Image.Resampling.BILINEAR, box=box)))


def test_augmentation_is_seeded(picture):
    a = augment.augment(picture, np.random.default_rng(3))
    b = augment.augment(picture, np.random.default_rng(3))
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert a.size == picture.size and a.mode == "RGB"


def test_a_scan_stays_recognisable_under_the_strongest_draws():
    scan = np.zeros((28, 28), np.uint8)
    scan[4:24, 9:19] = 220  # a trouser-like bar
    clean = FASHION_STYLES["clean"](scan_ink(scan), np.random.default_rng(0))
    strongest = augment.Augmentation(zoom_excess=0.25, offset=(0.5, 0.5), rotation_degrees=7.0, tint_weight=0.25,
                                     tint=(0.0, 0.5, 1.0), brightness_shift=0.08, contrast_change=0.3, blur_sigma=0.6,
                                     noise_sigma=10 / 255, signs=(1, 1, -1), noise_seed=0)
    out = np.asarray(augment.apply(clean, strongest), np.float64).mean(-1)
    reference = np.asarray(clean, np.float64).mean(-1)
    # the frame still correlates with the clean picture
    assert np.corrcoef(out.ravel(), reference.ravel())[0, 1] > 0.5
