"""ImageNet-C corruptions (`data.corruptions`): checked against ImageNet-C's definitions
(Hendrycks & Dietterich, `make_imagenet_c.py`): its severity constants, written out here, and
reference computations of the formulas; the three re-implemented corruptions against the
library's own functions run under a compatibility shim."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image
from scipy.ndimage import gaussian_filter

from robustvlm.data import corruptions
from robustvlm.errors import ConfigError
from robustvlm.extras import installed

pytestmark = pytest.mark.skipif(not installed("corruptions"), reason="needs the [corruptions] extra")

# ImageNet-C's severity constants (make_imagenet_c.py), copied from the paper's code
GAUSSIAN_NOISE = (0.08, 0.12, 0.18, 0.26, 0.38)
SHOT_NOISE = (60, 25, 12, 5, 3)
SPECKLE_NOISE = (0.15, 0.2, 0.35, 0.45, 0.6)
CONTRAST = (0.4, 0.3, 0.2, 0.1, 0.05)
PIXELATE = (0.6, 0.5, 0.4, 0.3, 0.25)
JPEG_QUALITY = (25, 18, 15, 10, 7)
GAUSSIAN_BLUR = (1, 2, 3, 4, 6)
GLASS_BLUR = ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2))
FOG = ((1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4))


@pytest.fixture(scope="module")
def picture() -> Image.Image:
    rng = np.random.default_rng(0)
    arr = (rng.random((48, 40, 3)) * 200 + 20).astype(np.uint8)
    arr[10:30, 10:25] = 240  # an edge, so blurs have something to do
    return Image.fromarray(arr, "RGB")


def _uint8(x: np.ndarray) -> np.ndarray:
    return np.uint8(x)


def _noise_reference(x: np.ndarray, seed: int, severity: int, kind: str) -> np.ndarray:
    state = np.random.RandomState(seed)  # np.random.seed(s) draws as RandomState(s)
    v = x / 255.0
    if kind == "gaussian":
        out = v + state.normal(size=v.shape, scale=GAUSSIAN_NOISE[severity - 1])
    elif kind == "shot":
        c = SHOT_NOISE[severity - 1]
        out = state.poisson(v * c) / float(c)
    else:
        out = v + v * state.normal(size=v.shape, scale=SPECKLE_NOISE[severity - 1])
    return _uint8(np.clip(out, 0, 1) * 255)


@pytest.mark.parametrize("severity", corruptions.SEVERITIES)
@pytest.mark.parametrize(("name", "kind"), [("gaussian_noise", "gaussian"), ("shot_noise", "shot"),
                                            ("speckle_noise", "speckle")])
def test_noise_corruptions_follow_imagenet_c_formulas_and_constants(picture, severity, name, kind):
    out = corruptions.corrupt(picture, name, severity, seed=11)
    assert np.array_equal(np.asarray(out), _noise_reference(np.asarray(picture), 11, severity, kind))


@pytest.mark.parametrize("severity", corruptions.SEVERITIES)
def test_contrast_pixelate_and_jpeg_follow_imagenet_c(picture, severity):
    x = np.asarray(picture) / 255.0
    means = x.mean(axis=(0, 1), keepdims=True)
    expected = _uint8(np.clip((x - means) * CONTRAST[severity - 1] + means, 0, 1) * 255)
    assert np.array_equal(np.asarray(corruptions.corrupt(picture, "contrast", severity, 0)), expected)

    c = PIXELATE[severity - 1]
    w, h = picture.size
    small = picture.resize((int(w * c), int(h * c)), Image.Resampling.BOX).resize((w, h), Image.Resampling.NEAREST)
    assert np.array_equal(np.asarray(corruptions.corrupt(picture, "pixelate", severity, 0)), np.asarray(small))

    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=JPEG_QUALITY[severity - 1])
    jpeg = np.asarray(Image.open(buffer).convert("RGB"))
    assert np.array_equal(np.asarray(corruptions.corrupt(picture, "jpeg_compression", severity, 0)), jpeg)


@pytest.mark.parametrize("severity", corruptions.SEVERITIES)
def test_the_repaired_gaussian_blur_is_a_per_channel_gaussian_of_imagenet_c_sigma(picture, severity):
    assert corruptions.GAUSSIAN_BLUR == GAUSSIAN_BLUR
    x = np.asarray(picture) / 255.0
    sigma = GAUSSIAN_BLUR[severity - 1]
    # scikit-image's gaussian: scipy's filter per channel, mode "nearest", truncate 4
    expected = np.stack([gaussian_filter(x[..., k], sigma, mode="nearest", truncate=4.0) for k in range(3)], -1)
    out = np.asarray(corruptions.corrupt(picture, "gaussian_blur", severity, 0)).astype(int)
    assert np.abs(out - _uint8(np.clip(expected, 0, 1) * 255).astype(int)).max() <= 1


def _library_under_shim(monkeypatch: pytest.MonkeyPatch) -> Any:
    """imagecorruptions' own module with the two spellings it needs: `multichannel` and `np.float_`."""
    module = corruptions.library().corruptions
    from skimage.filters import gaussian

    def old_gaussian(image: np.ndarray, sigma: float, multichannel: bool = False, **kw: Any) -> np.ndarray:
        return gaussian(image, sigma=sigma, channel_axis=-1 if multichannel else None, **kw)

    monkeypatch.setattr(module, "gaussian", old_gaussian)
    monkeypatch.setattr(np, "float_", np.float64, raising=False)
    return module


@pytest.mark.parametrize("severity", corruptions.SEVERITIES)
@pytest.mark.parametrize("name", ["glass_blur", "fog", "gaussian_blur"])
def test_repaired_corruptions_equal_the_library_definition_under_a_shim(picture, monkeypatch, severity, name):
    assert corruptions.GLASS_BLUR == GLASS_BLUR and corruptions.FOG == FOG
    reference = getattr(_library_under_shim(monkeypatch), name)
    with corruptions.seeded_global_numpy(5):
        expected = np.uint8(reference(picture, severity))
    assert np.array_equal(np.asarray(corruptions.corrupt(picture, name, severity, seed=5)), expected)


def test_every_corruption_runs_at_every_severity_on_a_grey_picture():
    grey = Image.fromarray((np.arange(64 * 64).reshape(64, 64) % 251).astype(np.uint8), "L")
    for name in (*corruptions.COMMON, *corruptions.VALIDATION):
        for severity in (1, 5):
            out = corruptions.corrupt(grey, name, severity, seed=1)
            assert out.size == grey.size and out.mode == "RGB"


def test_a_corruption_is_a_function_of_its_seed_and_leaves_the_global_stream_alone(picture):
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = corruptions.corrupt(picture, "gaussian_noise", 3, seed=1)
    assert np.array_equal(np.random.get_state()[1], before)
    assert np.array_equal(np.asarray(a), np.asarray(corruptions.corrupt(picture, "gaussian_noise", 3, seed=1)))
    assert not np.array_equal(np.asarray(a), np.asarray(corruptions.corrupt(picture, "gaussian_noise", 3, seed=2)))


def test_bad_names_severities_and_sizes_are_refused(picture):
    with pytest.raises(ConfigError, match="unknown corruption 'haze'"):
        corruptions.corrupt(picture, "haze", 1, 0)
    with pytest.raises(ConfigError, match="severity must be one of"):
        corruptions.corrupt(picture, "fog", 6, 0)
    with pytest.raises(ConfigError, match="at least 32x32"):
        corruptions.corrupt(picture.resize((28, 28)), "fog", 1, 0)


def _image_folder(root, sizes=((40, 36), (48, 48))):
    from robustvlm.data.synth.writer import save_png

    rng = np.random.default_rng(2)
    for c in ("coat", "bag"):
        (root / c).mkdir(parents=True)
        for i, size in enumerate(sizes):
            save_png(Image.fromarray((rng.random((size[1], size[0], 3)) * 255).astype(np.uint8)), root / c / f"{i}.png")
    return root


def test_data_corrupt_writes_a_paired_domain_suite_and_resumes(tmp_path):
    from robustvlm.cli import main
    from robustvlm.data.corrupted_suite import picture_seed

    source = _image_folder(tmp_path / "src")
    out = tmp_path / "suite"
    assert main(["data", "corrupt", str(source), "--out", str(out), "--corruptions", "fog,contrast",
                 "--severities", "1,5", "--seed", "3"]) == 0
    domains = sorted(d.name for d in out.iterdir() if d.is_dir())
    assert domains == ["clean", "contrast-1", "contrast-5", "fog-1", "fog-5"]
    for domain in domains:
        assert sorted(p.name for p in (out / domain / "coat").iterdir()) == ["0.png", "1.png"]
    clean = Image.open(out / "clean" / "bag" / "1.png")
    expected = corruptions.corrupt(clean, "fog", 5, picture_seed(3, "fog", 5, 0, 1))  # bag: class 0 (sorted)
    assert np.array_equal(np.asarray(Image.open(out / "fog-5" / "bag" / "1.png")), np.asarray(expected))
    stamp = (out / "fog-1" / "coat" / "0.png").stat().st_mtime_ns
    import shutil

    shutil.rmtree(out / "fog-5")  # as if killed before fog-5 finished
    assert main(["data", "corrupt", str(source), "--out", str(out), "--corruptions", "fog,contrast",
                 "--severities", "1,5", "--seed", "3"]) == 0
    assert (out / "fog-1" / "coat" / "0.png").stat().st_mtime_ns == stamp  # kept
    assert np.array_equal(np.asarray(Image.open(out / "fog-5" / "bag" / "1.png")), np.asarray(expected))


def test_data_corrupt_refuses_bad_input_with_one_line(tmp_path, capsys):
    from robustvlm.cli import main

    source = _image_folder(tmp_path / "src", sizes=((40, 36), (28, 28)))
    assert main(["data", "corrupt", str(source), "--out", str(tmp_path / "o"), "--corruptions", "fog"]) == 2
    err = capsys.readouterr().err
    assert "1.png" in err and "at least 32x32" in err
    assert main(["data", "corrupt", str(source), "--out", str(tmp_path / "o"), "--corruptions", "haze"]) == 2
    assert "unknown haze" in capsys.readouterr().err
    assert main(["data", "corrupt", str(source), "--out", str(tmp_path / "o"), "--severities", "0,7"]) == 2
    assert main(["data", "corrupt", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "bad" / "coat").mkdir(parents=True)
    (tmp_path / "bad" / "coat" / "x.png").write_bytes(b"not a png")
    assert main(["data", "corrupt", str(tmp_path / "bad"), "--out", str(tmp_path / "o2")]) == 2
    assert "x.png" in capsys.readouterr().err
