"""Distractor choice: the wrong options of a question are the classes nearest to its answer.

Each method defines a distance between the classes of the option pool; a question's distractors
are the other classes in increasing distance, ties broken at random (seeded, per question):

| method  | distance between two classes                                             |
|---------|--------------------------------------------------------------------------|
| random  | none (all equal), so distractors are a uniform draw from the other classes |
| wordnet | shortest path between their synsets in the WordNet hypernym tree (text obfuscation) |
| text    | 1 - cosine of the class names' sentence embeddings (mean-pooled, normalised) |
| visual  | 1 - cosine of the classes' mean image embeddings (visual obfuscation)     |

WordNet looks a class up by its key when that is a WordNet id ("n02084071"), else by its name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from robustvlm.data.images import load_image
from robustvlm.errors import ConfigError, DataError

if TYPE_CHECKING:
    from robustvlm.models.text_encoder import SentenceEncoder

METHODS = ("random", "wordnet", "text", "visual")
TextEncoder = Callable[[Sequence[str]], np.ndarray]  # texts -> embeddings [n, d]
ImageEmbedder = Callable[[list[Image.Image]], np.ndarray]  # RGB images -> embeddings [n, d]
IMAGES_PER_BATCH = 64


@dataclass
class ClassPool:
    """The classes options are drawn from.

    Attributes:
        keys: class identifiers (folder names, WordNet ids...), in a fixed order.
        names: the display name of each key (what the options show), same order.
        images: image references (paths or encoded bytes) per key; only `visual` needs them.
    """

    keys: list[str]
    names: list[str]
    images: dict[str, list[str | bytes]] = field(default_factory=dict)


@lru_cache(maxsize=1)
def default_sentence_encoder() -> SentenceEncoder:
    """all-MiniLM-L6-v2 (`models.text_encoder.SentenceEncoder`), loaded once. torch and
    transformers are imported only here and in `text_embeddings`, so that building questions
    with other distractor methods does not pay for them."""
    from robustvlm.models.text_encoder import SentenceEncoder

    return SentenceEncoder()


def cosine_distances(embeddings: np.ndarray) -> np.ndarray:
    """1 - cosine similarity between the rows of `embeddings` [C, d]; returns [C, C]."""
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise DataError("an embedding is all zeros; its cosine similarity is undefined")
    unit = embeddings / norms
    return 1.0 - unit @ unit.T


def wordnet_distances(pool: ClassPool) -> np.ndarray:
    """WordNet tree distances [C, C] (NLTK is imported only when this method is used)."""
    from robustvlm.data.wordnet import is_wordnet_id, tree_distances

    return tree_distances([key if is_wordnet_id(key) else name for key, name in zip(pool.keys, pool.names)])


def text_embeddings(names: Sequence[str], encoder: TextEncoder | str | Path | None) -> np.ndarray:
    """Embeddings [C, d] of the class names under `encoder` (callable, model folder or None)."""
    if encoder is None:
        encoder = default_sentence_encoder()
    elif isinstance(encoder, str | Path):
        from robustvlm.models.text_encoder import SentenceEncoder

        encoder = SentenceEncoder(encoder)
    return np.asarray(encoder(list(names)), dtype=np.float64)


def class_mean_embeddings(pool: ClassPool, image_embedder: ImageEmbedder | None) -> np.ndarray:
    """Mean image embedding of each class of the pool, [C, d], images embedded in batches."""
    if image_embedder is None:
        raise ConfigError("visual distractors need an image_embedder (images -> [n, d] array)")
    missing = [key for key in pool.keys if not pool.images.get(key)]
    if missing:
        raise DataError(f"visual distractors need images of every class; none for {missing}")
    means = []
    for key in pool.keys:
        refs = pool.images[key]
        batches = (refs[start : start + IMAGES_PER_BATCH] for start in range(0, len(refs), IMAGES_PER_BATCH))
        vectors = np.concatenate([_embed_images(batch, key, image_embedder) for batch in batches])
        means.append(vectors.mean(axis=0))
    return np.stack(means)


def _embed_images(refs: list[str | bytes], key: str, image_embedder: ImageEmbedder) -> np.ndarray:
    """Embeddings [len(refs), d] of one batch of a class's images."""
    vectors = np.asarray(image_embedder([load_image(ref, record=key) for ref in refs]), dtype=np.float64)
    if vectors.ndim != 2 or len(vectors) != len(refs):
        raise ConfigError(f"image_embedder returned shape {vectors.shape} for {len(refs)} images; expected [n, d]")
    return vectors


def class_distances(
    method: str,
    pool: ClassPool,
    *,
    encoder: TextEncoder | str | Path | None = None,
    image_embedder: ImageEmbedder | None = None,
) -> np.ndarray:
    """The distance matrix [C, C] between the pool's classes under `method` (see METHODS)."""
    builders: Mapping[str, Callable[[], np.ndarray]] = {
        "random": lambda: np.zeros((len(pool.keys), len(pool.keys))),
        "wordnet": lambda: wordnet_distances(pool),
        "text": lambda: cosine_distances(text_embeddings(pool.names, encoder)),
        "visual": lambda: cosine_distances(class_mean_embeddings(pool, image_embedder)),
    }
    if method not in builders:
        raise ConfigError(f"unknown distractor method {method!r}; expected one of {', '.join(METHODS)}")
    return builders[method]()


def nearest_others(distances: np.ndarray, index: int, count: int, rng: np.random.Generator) -> list[int]:
    """The `count` classes nearest to class `index` (itself excluded), nearest first; ties in
    `distances[index]` are ordered at random by `rng`."""
    others = np.delete(np.arange(len(distances)), index)
    tie_break = rng.random(len(others))
    order = np.lexsort((tie_break, distances[index, others]))
    return others[order[:count]].tolist()


def choose_distractors(
    method: str,
    pool: ClassPool,
    answers: Sequence[str],
    count: int,
    *,
    seed: int = 0,
    encoder: TextEncoder | str | Path | None = None,
    image_embedder: ImageEmbedder | None = None,
) -> list[list[str]]:
    """The distractor keys of each question, nearest first.

    Args:
        method: one of METHODS.
        pool: the classes options are drawn from.
        answers: the answer key of each question (must be in `pool.keys`).
        count: distractors per question (K - 1); at most len(pool.keys) - 1.
        seed: seeds the tie-breaking (for `random`, the whole draw).
        encoder: `text` method: a callable texts -> [n, d], an HF model folder, or None for
            all-MiniLM-L6-v2.
        image_embedder: `visual` method: a callable list of RGB PIL images -> [n, d].
    """
    if not 0 <= count < len(pool.keys):
        raise ConfigError(
            f"{count} distractors need more than {count} classes; the pool has {len(pool.keys)}"
        )
    distances = class_distances(method, pool, encoder=encoder, image_embedder=image_embedder)
    position = {key: i for i, key in enumerate(pool.keys)}
    rng = np.random.default_rng(seed)
    chosen = []
    for answer in answers:
        if answer not in position:
            raise DataError(f"answer class {answer!r} is not in the option pool")
        chosen.append([pool.keys[j] for j in nearest_others(distances, position[answer], count, rng)])
    return chosen
