"""Built-in synthetic benchmarks: determinism, manifests, label/colour statistics, pixel-level truth."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage
from sklearn.datasets import load_digits

from robustvlm.data.synth import BENCHMARKS, synthesize
from robustvlm.data.synth.shortcut import noisy_coloured_labels
from robustvlm.data.synth.tasks import VOCABULARY
from robustvlm.data.synth.writer import SplitSizes
from robustvlm.errors import ConfigError

STANDARD_FIELDS = {
    "id": str,
    "image": str,
    "instruction": str,
    "target": str,
    "env": str,
    "split": str,
    "ood": bool,
}
PALETTE_NAMES = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220),
                 "yellow": (235, 200, 30), "purple": (140, 60, 190), "orange": (245, 130, 20)}  # fmt: skip
MIN_BLOB = 6
AGREEMENT = {"train-0.9": 0.9, "train-0.8": 0.8, "test-reversed": 0.1, "test-nocolour": 0.5}


def read_rows(out: Path) -> list[dict]:
    with (out / "data.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def pixels(out: Path, row: dict) -> np.ndarray:
    return np.asarray(Image.open(out / row["image"]).convert("RGB"), dtype=np.int32)


def saturated(img: np.ndarray, threshold: int = 60) -> np.ndarray:
    """(H, W) bool: strongly coloured pixels (backgrounds, text and axes are near grey)."""
    return (img.max(axis=2) - img.min(axis=2)) > threshold


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def within_binomial(successes: int, n: int, p: float, z: float = 4.5) -> bool:
    return abs(successes / n - p) <= z * np.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module")
def tasks_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tasks")
    synthesize("tasks", out, seed=3, n_per_env=30)
    return out


@pytest.fixture(scope="module")
def spurious_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("spurious")
    synthesize("spurious", out, seed=1, n_per_env=2000)
    return out


@pytest.fixture(scope="module")
def digits_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits")
    synthesize("digits", out, seed=2)
    return out


# ---------------------------------------------------------------- determinism and format


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_same_seed_same_bytes_other_seed_differs(name, tmp_path):
    a = synthesize(name, tmp_path / "a", seed=5, n_per_env=4).parent
    b = synthesize(name, tmp_path / "b", seed=5, n_per_env=4).parent
    c = synthesize(name, tmp_path / "c", seed=6, n_per_env=4).parent
    assert tree_digest(a) == tree_digest(b)
    assert tree_digest(a) != tree_digest(c)


@pytest.mark.parametrize("fixture", ["tasks_out", "spurious_out", "digits_out"])
def test_records_images_and_manifest_agree(fixture, request):
    out = request.getfixturevalue(fixture)
    rows = read_rows(out)
    manifest = json.loads((out / "manifest.json").read_text())
    counted: dict[str, dict] = {}
    for row in rows:
        for key, kind in STANDARD_FIELDS.items():
            assert isinstance(row[key], kind), (key, row)
        assert row["split"] in {"train", "val", "test"}
        assert (out / row["image"]).is_file()
        entry = counted.setdefault(row["env"], {"train": 0, "val": 0, "test": 0, "ood": row["ood"]})
        entry[row["split"]] += 1
        assert entry["ood"] == row["ood"]
    assert counted == manifest["envs"]
    assert len({row["id"] for row in rows}) == len(rows)
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted(
        Path(r["image"]).name for r in rows
    )
    size = manifest["image_size"]
    with Image.open(out / rows[0]["image"]) as img:
        assert img.size == (size, size) and img.mode == "RGB"


@pytest.mark.parametrize("fixture", ["tasks_out", "spurious_out", "digits_out"])
def test_ood_envs_are_test_only_and_in_domain_envs_have_all_splits(fixture, request):
    envs = json.loads((request.getfixturevalue(fixture) / "manifest.json").read_text())["envs"]
    for counts in envs.values():
        if counts["ood"]:
            assert counts["train"] == counts["val"] == 0 and counts["test"] > 0
        else:
            assert min(counts["train"], counts["val"], counts["test"]) > 0


def test_tasks_environments_follow_the_paper_layout(tasks_out):
    envs = json.loads((tasks_out / "manifest.json").read_text())["envs"]
    in_domain = sorted(e for e, c in envs.items() if not c["ood"])
    ood = sorted(e for e, c in envs.items() if c["ood"])
    assert len(in_domain) == 8 and {e.split("/")[0] for e in in_domain} == {
        "general",
        "reasoning",
        "doc-chart",
    }
    assert ood == ["ocr/number", "ocr/word"]
    assert envs["general/caption"] == {"train": 30, "val": 3, "test": 6, "ood": False}


def test_split_sizes_scale_with_floors():
    base = SplitSizes(train=200, val=20, test=40, ood_test=40)
    assert base.scaled(None) == base
    assert base.scaled(400) == SplitSizes(400, 40, 80, 80)
    assert base.scaled(5) == SplitSizes(5, 2, 4, 4)


# ---------------------------------------------------------------- tasks: answers match the pixels


def measured_bars(img: np.ndarray) -> list[int]:
    """Heights (px) of the coloured bars, left to right, measured from the image."""
    mask = saturated(img)
    columns = mask.any(axis=0)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], columns.astype(int), [0]])))
    runs = list(zip(edges[::2], edges[1::2]))
    return [int(mask[:, (lo + hi) // 2].sum()) for lo, hi in runs]


def test_chart_answers_match_bars_measured_in_pixels(tasks_out):
    rows = [r for r in read_rows(tasks_out) if r["env"].startswith("doc-chart/")]
    assert rows
    for row in rows:
        heights = np.array(measured_bars(pixels(tasks_out, row)), float)
        values = np.array(row["values"], float)
        assert len(heights) == len(row["labels"]), row["id"]
        scale = heights.sum() / values.sum()
        assert np.all(np.abs(heights - scale * values) <= 1.0), (row["id"], heights, values)
        if row["env"] == "doc-chart/tallest":
            assert row["target"] == row["labels"][int(np.argmax(heights))]
        else:
            label = re.fullmatch(r"What is the value of (\w+)\?", row["instruction"]).group(1)
            measured = heights[row["labels"].index(label)] / scale
            assert int(row["target"]) == round(measured)


def shape_components(img: np.ndarray) -> list[tuple[str, int]]:
    """(nearest palette colour name, area in px) of every coloured blob, left to right.

    Blobs are 8-connected; specks under MIN_BLOB px (star tips cut off by rasterisation) are dropped.
    """
    labels, n = ndimage.label(saturated(img), structure=np.ones((3, 3)))
    blobs = []
    order = np.argsort(
        [c[1] for c in ndimage.center_of_mass(np.ones(labels.shape), labels, range(1, n + 1))]
    )
    for k in order + 1:
        region = labels == k
        if region.sum() < MIN_BLOB:
            continue
        mean = img[region].mean(axis=0)
        name = min(PALETTE_NAMES, key=lambda c: np.sum((mean - PALETTE_NAMES[c]) ** 2))
        blobs.append((name, int(region.sum())))
    return blobs


def test_reasoning_answers_match_shapes_measured_in_pixels(tasks_out):
    rows = [r for r in read_rows(tasks_out) if r["env"].startswith("reasoning/")]
    for row in rows:
        blobs = shape_components(pixels(tasks_out, row))
        assert len(blobs) == len(row["shapes"]), row["id"]
        if row["env"] == "reasoning/compare":
            first, second = re.fullmatch(
                r"Are there more (\w+) shapes than (\w+) shapes\?", row["instruction"]
            ).groups()
            n_first = sum(c == first for c, _ in blobs)
            n_second = sum(c == second for c, _ in blobs)
            assert row["target"] == ("yes" if n_first > n_second else "no")
        elif row["env"] == "reasoning/largest":
            assert row["target"] == max(blobs, key=lambda b: b[1])[0]
        else:
            kind = re.fullmatch(r"How many (\w+)s are there\?", row["instruction"]).group(1)
            assert int(row["target"]) == sum(s[0] == kind for s in row["shapes"])


def test_general_captions_name_the_drawn_colours_left_to_right(tasks_out):
    for row in (r for r in read_rows(tasks_out) if r["env"].startswith("general/")):
        drawn = [colour for colour, _ in shape_components(pixels(tasks_out, row))]
        named = [w for w in re.findall(r"\w+", row["target"]) if w in PALETTE_NAMES]
        assert drawn == named, row["id"]


def test_ocr_vocabulary_is_shared_with_chart_labels(tasks_out):
    rows = read_rows(tasks_out)
    words = {r["target"] for r in rows if r["env"] == "ocr/word"}
    labels = {
        w
        for r in rows
        if r["env"].startswith("doc-chart/") and r["split"] == "train"
        for w in r["labels"]
    }
    assert words <= set(VOCABULARY) and labels <= set(VOCABULARY)
    assert words & labels
    for row in (r for r in rows if r["env"] == "ocr/number"):
        assert re.fullmatch(r"\d{1,3}(,\d{3})*|\d+", row["target"]), row


# ---------------------------------------------------------------- spurious / digits statistics


def background_colour(img: np.ndarray) -> str:
    corner = img[:3, :3].reshape(-1, 3).mean(axis=0)
    return "red" if corner[0] > corner[1] else "green"


@pytest.mark.parametrize(
    ("fixture", "first_answer"), [("spurious_out", "square"), ("digits_out", "small")]
)
def test_colour_agreement_and_label_noise_rates(fixture, first_answer, request):
    out = request.getfixturevalue(fixture)
    rows = read_rows(out)
    answer_colour = json.loads((out / "manifest.json").read_text())["colour_of_answer"]
    assert answer_colour[first_answer] == "red"
    for env, p in AGREEMENT.items():
        env_rows = [r for r in rows if r["env"] == env]
        agree = sum(
            background_colour(pixels(out, r)) == answer_colour[r["target"]] for r in env_rows
        )
        assert within_binomial(agree, len(env_rows), p), (env, agree / len(env_rows))
    flipped = sum(r["target"] != r["clean_target"] for r in rows)
    assert within_binomial(flipped, len(rows), 0.25)


def test_noisy_coloured_labels_match_closed_form_rates():
    rng = np.random.default_rng(0)
    clean = rng.integers(0, 2, size=200_000)
    noisy, colour = noisy_coloured_labels(rng, clean, noise=0.25, agreement=0.8)
    n = len(clean)
    assert within_binomial(int((noisy != clean).sum()), n, 0.25)
    assert within_binomial(int((colour == noisy).sum()), n, 0.8)
    # colour agrees with the clean label when both or neither step flipped: 0.75 * 0.8 + 0.25 * 0.2
    assert within_binomial(int((colour == clean).sum()), n, 0.65)


def test_spurious_clean_label_is_the_drawn_shape(spurious_out):
    rows = read_rows(spurious_out)[:600]
    for row in rows:
        img = pixels(spurious_out, row)
        bright = img.min(axis=2) > 120
        ys, xs = np.nonzero(bright)
        fill = bright.sum() / ((np.ptp(ys) + 1) * (np.ptp(xs) + 1))
        assert ("square" if fill > 0.9 else "circle") == row["clean_target"], (row["id"], fill)


def test_digits_show_the_recorded_scan_and_keep_train_and_eval_scans_apart(digits_out):
    scans = load_digits()
    rows = read_rows(digits_out)
    for row in rows:
        digit = int(scans.target[row["source_index"]])
        assert row["digit"] == digit
        assert row["clean_target"] == ("large" if digit >= 5 else "small")
    for row in rows[::25]:
        ink = pixels(digits_out, row).min(axis=2).astype(float)
        blocks = ink.reshape(8, 8, 8, 8).mean(axis=(1, 3))
        corr = np.corrcoef(blocks.ravel(), scans.images[row["source_index"]].ravel())[0, 1]
        assert corr > 0.9, (row["id"], corr)
    train = {r["source_index"] for r in rows if r["split"] == "train"}
    held_out = {r["source_index"] for r in rows if r["split"] != "train"}
    assert not train & held_out


# ---------------------------------------------------------------- domains


def test_domains_folder_layout_matches_manifest(domains_suite):
    manifest = json.loads((domains_suite / "manifest.json").read_text())
    expected = {
        "shapes": (["photo", "sketch", "cartoon", "noisy"], 8),
        "digits": (["clean", "rotated", "coloured", "noisy"], 10),
    }
    assert sorted(p.name for p in domains_suite.iterdir()) == ["digits", "manifest.json", "shapes"]
    for suite, (domains, n_classes) in expected.items():
        entry = manifest["suites"][suite]
        assert entry["domains"] == domains and len(entry["classes"]) == n_classes
        assert sorted(p.name for p in (domains_suite / suite).iterdir()) == sorted(domains)
        for domain in domains:
            folders = sorted(p.name for p in (domains_suite / suite / domain).iterdir())
            assert folders == sorted(entry["classes"])
            for cls in entry["classes"]:
                files = sorted((domains_suite / suite / domain / cls).glob("*.png"))
                assert len(files) == entry["counts"][domain][cls] == 3
                with Image.open(files[0]) as img:
                    assert img.size == (64, 64) and img.mode == "RGB"


def test_domains_styles_differ_as_described(domains_suite):
    def load(suite, domain, cls, i=0):
        return np.asarray(Image.open(domains_suite / suite / domain / cls / f"{i:04d}.png"), float)

    def roughness(img):
        return np.abs(np.diff(img, axis=1)).mean()

    for cls in ("circle", "star", "heart"):
        sketch, cartoon = load("shapes", "sketch", cls), load("shapes", "cartoon", cls)
        assert sketch.mean() > 200 and sketch.min() < 100  # dark lines on white paper
        assert (cartoon.max(axis=2) - cartoon.min(axis=2)).max() > 150  # saturated flat fill
        assert roughness(load("shapes", "noisy", cls)) > 3 * roughness(load("shapes", "photo", cls))
    scans = load_digits()
    clean = load("digits", "clean", "seven")[..., 0]
    noisy = load("digits", "noisy", "seven")[..., 0]
    assert np.corrcoef(clean.ravel(), noisy.ravel())[0, 1] > 0.6  # same scan under noise
    assert (
        np.corrcoef(clean.ravel(), load("digits", "rotated", "seven")[..., 0].ravel())[0, 1] < 0.9
    )
    sevens = scans.images[scans.target == 7]
    inner = clean[8:56, 8:56].reshape(8, 6, 8, 6).mean(axis=(1, 3))
    best = max(np.corrcoef(inner.ravel(), s.ravel())[0, 1] for s in sevens)
    assert best > 0.9


# ---------------------------------------------------------------- errors and re-runs


def test_bad_arguments_raise_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown synthetic benchmark"):
        synthesize("nope", tmp_path / "x")
    with pytest.raises(ConfigError, match="n_per_env"):
        synthesize("tasks", tmp_path / "x", n_per_env=0)
    with pytest.raises(ConfigError, match="seed"):
        synthesize("tasks", tmp_path / "x", seed=-1)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty"):
        synthesize("spurious", tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_rerun_into_same_folder_replaces_previous_output(tmp_path):
    synthesize("domains", tmp_path, n_per_env=2)
    synthesize("spurious", tmp_path, n_per_env=8)
    assert not (tmp_path / "shapes").exists()
    synthesize("spurious", tmp_path, n_per_env=4)
    assert len(list((tmp_path / "images").iterdir())) == len(read_rows(tmp_path))
