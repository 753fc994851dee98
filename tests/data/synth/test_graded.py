"""The graded-severity styles (`data.synth.graded`), each checked against an independent
computation (scipy.ndimage for rotation, blur and translation; arithmetic on the clean frame for
contrast, tint and noise), and the `fashion-test-graded` suite: the same scans as `fashion-test`."""

from __future__ import annotations

import filecmp
import json

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from robustvlm.data.real_images import FASHION_ROOT
from robustvlm.data.synth import graded as g
from robustvlm.data.synth import synthesize
from robustvlm.data.synth.domains import FASHION_STYLES, SIZE

needs_fashion = pytest.mark.skipif(
    not (FASHION_ROOT / "t10k-images-idx3-ubyte.gz").is_file(),
    reason="Debian's dataset-fashion-mnist is not installed (make install installs it as root)",
)


def _ink() -> np.ndarray:
    """A 48x48 ink patch: a solid off-centre bar and a soft disc (strokes of every strength)."""
    ink = np.zeros((48, 48), np.float32)
    ink[8:40, 14:22] = 1.0
    yy, xx = np.mgrid[0:48, 0:48]
    ink += np.clip(1.0 - np.hypot(yy - 30, xx - 32) / 9.0, 0.0, 1.0)
    return np.clip(ink, 0.0, 1.0)


def _clean() -> np.ndarray:
    return np.asarray(FASHION_STYLES["clean"](_ink(), np.random.default_rng(0)), np.float32)


def test_small_rotation_matches_scipy_rotate_at_the_drawn_angle():
    rng = np.random.default_rng(3)
    angle = float(rng.uniform(*g.SMALL_ROTATION_DEGREES)) * (1 if rng.random() < 0.5 else -1)
    ours = np.asarray(g.rotated_small(_ink(), np.random.default_rng(3)), np.float32)[..., 0]
    # PIL turns counter-clockwise on screen; scipy's rotate with the same angle does too (rows down)
    theirs = ndimage.rotate(_clean()[..., 0], angle, reshape=False, order=1, mode="constant", cval=0.0)
    assert 10 <= abs(angle) <= 20
    other_way = ndimage.rotate(_clean()[..., 0], -angle, reshape=False, order=1, mode="constant", cval=0.0)
    assert np.abs(ours - theirs).mean() < 2.0  # of 255: resampling differs at sub-pixel level only
    assert np.abs(ours - other_way).mean() > 4 * np.abs(ours - theirs).mean()  # the angle and its sign


def test_blur_matches_scipy_gaussian_filter():
    ours = np.asarray(g.blurred(_ink(), np.random.default_rng(0)), np.float32)[..., 0]
    theirs = ndimage.gaussian_filter(_clean()[..., 0], g.BLUR_SIGMA, mode="nearest")
    assert np.abs(ours - theirs).max() < 12.0 and np.abs(ours - theirs).mean() < 1.5
    assert np.abs(ours - _clean()[..., 0]).mean() > 3.0


@pytest.mark.parametrize("dy, dx", [(0, 0), (5, -3), (-8, 8), (8, -8)])
def test_shift_frame_matches_scipy_shift(dy, dx):
    frame = _clean()
    theirs = ndimage.shift(frame, (dy, dx, 0), order=0, mode="constant", cval=0.0)
    np.testing.assert_array_equal(g.shift_frame(frame, dy, dx), theirs)


def test_shifted_moves_the_scan_by_at_most_the_margin_and_never_clips_it():
    for seed in range(20):
        img = np.asarray(g.shifted(_ink(), np.random.default_rng(seed)), np.float32)
        assert img.sum() == pytest.approx(_clean().sum())  # the 8 px margin: no ink lost
        dy, dx = (int(v) for v in np.random.default_rng(seed).integers(-g.MAX_SHIFT_PX, g.MAX_SHIFT_PX + 1, 2))
        np.testing.assert_array_equal(img, ndimage.shift(_clean(), (dy, dx, 0), order=0))


def test_low_contrast_is_the_affine_map_about_mid_grey():
    ours = np.asarray(g.low_contrast(_ink(), np.random.default_rng(0)), np.float32)
    np.testing.assert_allclose(ours, np.rint(128 + 0.5 * (_clean() - 128)), atol=0)
    assert ours.min() == 64 and ours.max() == 192  # black -> 64, white -> 191.5 rounded


def test_tint_is_the_half_mix_of_the_clean_and_coloured_renderings():
    coloured = np.asarray(FASHION_STYLES["coloured"](_ink(), np.random.default_rng(7)), np.float32)
    ours = np.asarray(g.tinted(_ink(), np.random.default_rng(7)), np.float32)
    assert np.abs(ours - (_clean() + coloured) / 2).max() <= 1.0  # PIL's blend rounds
    assert 0 < np.abs(ours - _clean()).mean() < np.abs(coloured - _clean()).mean()


def test_stronger_noise_is_the_clean_frame_plus_the_drawn_normal_noise_clipped():
    ours = np.asarray(g.noisier(_ink(), np.random.default_rng(1)), np.float32)
    noise = np.random.default_rng(1).normal(0.0, 140.0, (SIZE, SIZE, 3))  # the clean frame draws nothing
    np.testing.assert_array_equal(ours, np.clip(np.rint(_clean() + noise), 0, 255))
    assert np.std(ours - _clean()) > 70.0  # clipping at 0 and 255 trims the 140


def test_every_style_draws_a_64x64_rgb_frame_deterministically():
    for name, style in g.GRADED_STYLES.items():
        a, b = style(_ink(), np.random.default_rng(5)), style(_ink(), np.random.default_rng(5))
        assert a.size == (SIZE, SIZE) and a.mode == "RGB", name
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


@needs_fashion
def test_the_graded_suite_shows_fashion_test_scans(tmp_path):
    synthesize("fashion-test", tmp_path / "a", n_per_env=2)
    synthesize("fashion-test-graded", tmp_path / "b", n_per_env=2)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["benchmark"] == "fashion-test-graded" and manifest["domains"] == list(g.GRADED_STYLES)
    cleans = sorted((tmp_path / "a" / "clean").glob("*/*.png"))
    assert len(cleans) == 20
    for png in cleans:
        assert filecmp.cmp(png, tmp_path / "b" / png.relative_to(tmp_path / "a"), shallow=False)
        blurred = Image.open(tmp_path / "b" / "blurred" / png.parent.name / png.name)
        assert blurred.size == (SIZE, SIZE)
