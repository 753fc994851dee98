"""Query/target pairs of contrastive training, from ordinary records.

A record `(image, instruction, target, env)` is a VQA pair — query = the image with the
instruction template filled with the record's instruction (the question), target = its answer —
unless its environment matches one of the caption patterns: then it is a caption pair, whose
query is the image alone (its instruction is not shown) and whose target is the caption.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import torch

from robustvlm.data.records import Example
from robustvlm.errors import DataError
from robustvlm.models.embedding import (
    EMBEDDING_FAMILIES,
    embedding_collator,
    query_example,
    query_text,
)

VQA, CAPTION = "vqa", "caption"  # the keys of models.embedding.EMBEDDING_FAMILIES


def pair_kind(example: Example, caption_envs: Sequence[str]) -> str:
    """"caption" when the record's environment matches a pattern of `caption_envs`, else "vqa"."""
    return CAPTION if any(fnmatchcase(example.env, p) for p in caption_envs) else VQA


def trained_family(examples: Sequence[Example], caption_envs: Sequence[str]) -> str:
    """The backend family of a model trained on these records (see EMBEDDING_FAMILIES)."""
    kinds = {pair_kind(ex, caption_envs) for ex in examples}
    return EMBEDDING_FAMILIES[kinds.pop()] if len(kinds) == 1 else EMBEDDING_FAMILIES["mixed"]


def target_groups(examples: Sequence[Example]) -> dict[str, int]:
    """An id per distinct target text (sorted, so every process numbers them alike)."""
    return {text: i for i, text in enumerate(sorted({ex.target for ex in examples}))}


@dataclass
class ContrastivePairCollator:
    """Examples -> {"query": batch, "target": batch, "groups": LongTensor [B]}: right-padded
    model inputs of the queries and of the target texts (`models.embedding`) and the id of each
    row's target text (rows with the same id are no negatives of each other).

    Args:
        processor: the model's processor.
        query_template: the instruction around a VQA pair's question.
        caption_envs: environment patterns of caption pairs.
        groups: target text -> id (`target_groups` of the training set).
    """

    processor: Any
    query_template: str
    caption_envs: Sequence[str]
    groups: dict[str, int]

    def __post_init__(self) -> None:
        self.collate = embedding_collator(self.processor)

    def query_of(self, ex: Example) -> Example:
        caption = pair_kind(ex, self.caption_envs) == CAPTION
        return query_example(ex.id, ex.image, "" if caption else query_text(ex.instruction, self.query_template), ex.source)

    def __call__(self, examples: list[Example]) -> dict[str, Any]:
        missing = [ex for ex in examples if ex.image is None]
        if missing:
            raise DataError("an embedding pair needs an image", missing[0].source or None, missing[0].id)
        return {
            "query": self.collate([self.query_of(ex) for ex in examples]),
            "target": self.collate([query_example(ex.id, None, ex.target, ex.source) for ex in examples]),
            "groups": torch.tensor([self.groups[ex.target] for ex in examples], dtype=torch.long),
        }
