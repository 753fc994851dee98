"""Gradient caching: the same loss and gradients as the plain full batch, dropout replayed, and
the same numbers as sentence-transformers' CachedMultipleNegativesRankingLoss."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from robustvlm.embeddings.gradcache import cached_backward, split_batch
from robustvlm.embeddings.loss import info_nce
from robustvlm.errors import ConfigError
from robustvlm.models import build_tiny_vlm, configure_trainable
from robustvlm.models.embedding import (
    EmbeddingModel,
    embed_batch,
    embedding_collator,
    query_example,
    query_text,
)

TAU, CHUNK = 0.05, 4


@pytest.fixture(scope="module")
def setup():
    """An embedding model with LoRA (dropout 0.1, B randomised so dropout changes outputs) and a
    batch of 6 image + question queries and 6 answer texts of different lengths."""
    vlm, processor = build_tiny_vlm("idefics3", hidden_size=32, vocab_size=300)
    vlm = configure_trainable(vlm, mode="lora", lora={"r": 4, "alpha": 16, "dropout": 0.1})
    g = torch.Generator().manual_seed(3)
    for name, p in vlm.named_parameters():
        if "lora_B" in name:
            p.data = 0.3 * torch.randn(p.shape, generator=g)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)) for _ in range(6)]
    collate = embedding_collator(processor)
    queries = collate([query_example(str(i), images[i], query_text("What is shown?" + " Look." * i)) for i in range(6)])
    targets = collate([query_example(str(i), None, "answer" + " word" * (5 - i)) for i in range(6)])
    return EmbeddingModel(vlm), queries, targets


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


def _cached(model, queries, targets, seed: int = 1) -> tuple[float, dict]:
    torch.manual_seed(seed)
    loss = cached_backward(model, queries, targets, chunk_size=CHUNK, loss_fn=lambda q, t: info_nce(q, t, temperature=TAU),
                           backward=lambda x: x.backward(), no_sync=nullcontext)
    return loss, _grads(model)


def _assert_same(got: dict, expected: dict, rel: float = 1e-5) -> None:
    """Every gradient equal up to `rel` x the largest entry of its tensor (float32 sums)."""
    assert got.keys() == expected.keys() and len(got) > 0
    for name in got:
        scale = float(expected[name].abs().max())
        torch.testing.assert_close(got[name], expected[name], atol=rel * scale, rtol=0, msg=name)


def _check_against(model, queries, targets, q: torch.Tensor, t: torch.Tensor) -> dict:
    """Back-propagate the reference loss of embeddings q, t (with their graphs); the cache must
    give the same loss and gradients. Returns the reference gradients."""
    reference = info_nce(q, t, temperature=TAU)
    reference.backward()
    expected = _grads(model)
    loss, got = _cached(model, queries, targets)
    assert loss == pytest.approx(float(reference), rel=1e-5)
    _assert_same(got, expected)
    return expected


def test_cached_loss_and_gradients_equal_the_plain_full_batch(setup):
    model, queries, targets = setup
    model.eval()  # no dropout: the plain batch and the chunks see the same network
    _check_against(model, queries, targets, *model(queries, targets))


def test_dropout_is_replayed(setup):
    """With dropout on, the cache must give the gradient of the very loss it computed: that of the
    chunks embedded in order from the same random state (the plain batch draws other masks)."""
    model, queries, targets = setup
    model.train()
    torch.manual_seed(1)
    q = torch.cat([model(c) for c in split_batch(queries, CHUNK)])
    t = torch.cat([model(c) for c in split_batch(targets, CHUNK)])
    expected = _check_against(model, queries, targets, q, t)
    _, other_masks = _cached(model, queries, targets, seed=2)
    assert any(not torch.allclose(other_masks[k], expected[k], atol=1e-4) for k in expected)


class _SentenceTransformerAdapter(nn.Module):
    """What sentence-transformers' cached losses call: features -> {"sentence_embedding": [n, D]}."""

    def __init__(self, model: EmbeddingModel):
        super().__init__()
        self.model = model

    def forward(self, features: dict) -> dict:
        return {"sentence_embedding": embed_batch(self.model.vlm, features)}


def test_matches_sentence_transformers_cached_mnrl(setup):
    from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss

    model, queries, targets = setup
    model.train()  # dropout on: both replay each chunk's random state in the same order
    st_loss = CachedMultipleNegativesRankingLoss(nn.Sequential(_SentenceTransformerAdapter(model)), scale=1 / TAU,
                                                 mini_batch_size=CHUNK)
    torch.manual_seed(1)
    theirs = st_loss([queries, targets], None)
    theirs.backward()
    expected = _grads(model)
    loss, got = _cached(model, queries, targets)
    assert loss == pytest.approx(float(theirs), rel=1e-5)
    _assert_same(got, expected)


def test_split_batch_trims_padding_and_cuts_flattened_pixels():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])
    batch = {
        "input_ids": torch.arange(12).reshape(3, 4), "attention_mask": mask,
        "image_grid_thw": torch.tensor([[1, 2, 2], [1, 2, 4], [1, 1, 2]]),
        "pixel_values": torch.arange(14).reshape(14, 1), "ids": ["a", "b", "c"],
    }
    first, second = split_batch(batch, 2)
    assert first["input_ids"].tolist() == [[0, 1, 2], [4, 5, 6]] and second["input_ids"].tolist() == [[8]]
    assert first["pixel_values"].flatten().tolist() == list(range(12))
    assert second["pixel_values"].flatten().tolist() == [12, 13]
    assert first["ids"] == ["a", "b"] and second["image_grid_thw"].tolist() == [[1, 1, 2]]
    with pytest.raises(ConfigError, match="right-padded"):
        split_batch({"input_ids": batch["input_ids"], "attention_mask": mask.flip(1)}, 2)


def test_split_batch_cuts_internvl_tiles_by_image_tokens():
    """InternVL: pixel_values [tiles, ...] flattened over the batch, each tile 2 image tokens (9)."""
    ids = torch.tensor([[9, 9, 9, 9, 1, 0], [9, 9, 1, 0, 0, 0], [9, 9, 9, 9, 9, 9]])  # 2, 1, 3 tiles
    batch = {"input_ids": ids, "attention_mask": (ids > 0).long(), "pixel_values": torch.arange(6).reshape(6, 1)}
    first, second = split_batch(batch, 2, image_token_id=9)
    assert first["pixel_values"].flatten().tolist() == [0, 1, 2] and second["pixel_values"].flatten().tolist() == [3, 4, 5]
    with pytest.raises(ConfigError, match="needs the image token"):
        split_batch(batch, 2)
    with pytest.raises(ConfigError, match="do not split evenly"):
        split_batch({**batch, "pixel_values": torch.arange(5).reshape(5, 1)}, 2, image_token_id=9)
