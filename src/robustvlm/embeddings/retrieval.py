"""Image-text retrieval with an embedding model: recall@k in both directions.

Each record is an image and its text (`target`: a caption or answer). Image queries are the
backend's query embeddings of the image with the record's instruction (`embed_queries`; a
caption-style model shows the image alone); candidates are the distinct texts
(`embed_texts`). Image -> text: the relevant candidate of an image is its own text. Text ->
image: the same similarities transposed; the relevant candidates of a text are all images
carrying it (records often share a text, e.g. a class name).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robustvlm.analysis.retrieval import Recall, recall_at_k
from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import DataError
from robustvlm.models.backends import Backend

DIRECTIONS = ("image_to_text", "text_to_image")


@dataclass(frozen=True)
class RetrievalScores:
    """Similarities [n_images, n_texts] and, per image, the index of its text in `texts`."""

    scores: np.ndarray
    texts: list[str]
    text_of_image: list[int]

    def relevant(self, direction: str) -> list[list[int]]:
        """Per query of `direction`, the indices of its relevant candidates."""
        if direction == "image_to_text":
            return [[t] for t in self.text_of_image]
        images_of: list[list[int]] = [[] for _ in self.texts]
        for image, text in enumerate(self.text_of_image):
            images_of[text].append(image)
        return images_of

    def matrix(self, direction: str) -> np.ndarray:
        return self.scores if direction == "image_to_text" else self.scores.T


def retrieval_scores(backend: Backend, examples: Sequence[Example], *, batch_size: int = 16) -> RetrievalScores:
    """Embed the records' images (with their instructions) and distinct texts; their cosines."""
    if not examples:
        raise DataError("the retrieval split has no records")
    texts = sorted({ex.target for ex in examples})
    index = {t: i for i, t in enumerate(texts)}
    queries = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        images = [load_image(ex.image, source=ex.source, record=ex.id) for ex in chunk]
        queries.append(backend.embed_queries(images, [ex.instruction for ex in chunk]))
    scores = np.concatenate(queries) @ backend.embed_texts(texts).T
    return RetrievalScores(scores, texts, [index[ex.target] for ex in examples])


def retrieval_recalls(scores: RetrievalScores, ks: Sequence[int] = (1, 5)) -> dict[str, list[Recall]]:
    """{direction: recall@k for each k} (`analysis.retrieval.recall_at_k`)."""
    return {d: recall_at_k(scores.matrix(d), scores.relevant(d), ks) for d in DIRECTIONS}
