"""Query/target pairs from records: VQA vs caption pairs, the trained family, duplicate groups."""

from __future__ import annotations

import pytest

from robustvlm.data.records import Example
from robustvlm.embeddings.pairs import (
    ContrastivePairCollator,
    pair_kind,
    target_groups,
    trained_family,
)
from robustvlm.errors import DataError


def _ex(env: str, target: str = "seven", image="img.png") -> Example:
    return Example(id=f"{env}-{target}", image=image, instruction="What digit is shown?", target=target, env=env,
                   source="data.jsonl")


def test_kinds_and_families():
    vqa, cap = _ex("digits/vqa"), _ex("digits/caption")
    assert pair_kind(vqa, ["*caption"]) == "vqa" and pair_kind(cap, ["*caption"]) == "caption"
    assert trained_family([vqa], ["*caption"]) == "vlm2vec-vqa"
    assert trained_family([cap], ["*"]) == "vlm2vec-caption"
    assert trained_family([vqa, cap], ["*caption"]) == "vlm2vec-mixed"
    assert target_groups([_ex("a", "two"), _ex("b", "one"), _ex("c", "two")]) == {"one": 0, "two": 1}


def test_collator_shows_the_question_only_in_vqa_queries(tiny_vlms, domains_suite):
    _, processor = tiny_vlms("idefics3")
    image = str(next((domains_suite / "digits" / "clean" / "seven").glob("*.png")))
    examples = [_ex("vqa", "seven", image), _ex("caption", "a handwritten seven", image)]
    collate = ContrastivePairCollator(processor, "Represent the given image with the following question: {question}",
                           ["caption"], target_groups(examples))
    batch = collate(examples)
    assert batch["groups"].tolist() == [1, 0]
    assert collate.query_of(examples[0]).instruction.endswith("question: What digit is shown?")
    assert collate.query_of(examples[1]).instruction == ""
    texts = processor.tokenizer.batch_decode(batch["target"]["input_ids"], skip_special_tokens=False)
    assert "a handwritten seven" in texts[1] and "pixel_values" not in batch["target"]
    with pytest.raises(DataError, match=r"data.jsonl \[vqa-seven\]: an embedding pair needs an image"):
        collate([_ex("vqa", "seven", None)])
