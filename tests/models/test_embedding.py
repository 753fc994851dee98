"""VLM embeddings: last-token pooling, batch independence, query styles, the model's spec file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.models import build_tiny_vlm
from robustvlm.models.embedding import (
    SPEC_FILE,
    Embedder,
    EmbeddingSpec,
    embedding_collator,
    last_token_pool,
    query_example,
)


def test_last_token_pool_takes_the_last_real_position_on_either_side():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    left = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1]])
    torch.testing.assert_close(last_token_pool(hidden, right), torch.stack([hidden[0, 1], hidden[1, 3]]))
    torch.testing.assert_close(last_token_pool(hidden, left), torch.stack([hidden[0, 3], hidden[1, 3]]))


@pytest.fixture(scope="module")
def vlms():
    """{kind: (model in eval mode, processor)} of small tiny VLMs owned by this module."""
    built = {kind: build_tiny_vlm(kind, hidden_size=32, vocab_size=300) for kind in ("idefics3", "llava")}
    return {kind: (model.eval(), processor) for kind, (model, processor) in built.items()}


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)) for _ in range(4)]


@pytest.mark.parametrize("kind", ["idefics3", "llava"])
def test_embeddings_are_unit_norm_and_do_not_depend_on_the_batch(vlms, images, kind):
    model, processor = vlms[kind]
    spec = EmbeddingSpec(family="vlm2vec-vqa")
    questions = ["What digit is shown?", "Is it rotated?", "What colour is the background of this image?", None]
    together = Embedder(model, processor, spec, batch_size=4).queries(images, questions)
    alone = Embedder(model, processor, spec, batch_size=1).queries(images, questions)
    assert together.shape == (4, model.config.text_config.hidden_size)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(together, alone, atol=1e-5)
    texts = ["seven", "a handwritten seven on a black background", "no"]
    np.testing.assert_allclose(Embedder(model, processor, spec, batch_size=3).texts(texts),
                               Embedder(model, processor, spec, batch_size=1).texts(texts), atol=1e-5)
    assert not np.allclose(together[0], together[3], atol=1e-3)  # the question changes the query


def test_the_embedding_is_the_backbone_state_at_the_last_prompt_token(vlms):
    model, processor = vlms["idefics3"]
    got = Embedder(model, processor, EmbeddingSpec(family="vlm2vec-vqa")).texts(["seven"])[0]
    batch = embedding_collator(processor)([query_example("a", None, "seven")])
    assert processor.tokenizer.decode(batch["input_ids"][0]).endswith("<|im_start|>assistant\n")
    with torch.no_grad():
        hidden = model.model(input_ids=batch["input_ids"]).last_hidden_state[0, -1]
    np.testing.assert_allclose(got, (hidden / hidden.norm()).numpy(), atol=1e-6)


def test_a_caption_model_embeds_the_image_alone(vlms, images):
    model, processor = vlms["idefics3"]
    caption = Embedder(model, processor, EmbeddingSpec(family="vlm2vec-caption", query_style="image"))
    np.testing.assert_allclose(caption.queries(images[:2], ["What digit?", "Other question?"]),
                               caption.queries(images[:2]), atol=1e-6)
    assert EmbeddingSpec(family="x").query_text("What digit?").endswith("question: What digit?")


def test_spec_round_trip_and_errors(tmp_path):
    spec = EmbeddingSpec(family="vlm2vec-caption", query_style="image", class_templates=("a {class}",))
    spec.save(tmp_path)
    assert EmbeddingSpec.read(tmp_path) == spec
    assert EmbeddingSpec.read(tmp_path / "none") is None
    (tmp_path / SPEC_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match=SPEC_FILE):
        EmbeddingSpec.read(tmp_path)
    with pytest.raises(ConfigError, match="query_style"):
        EmbeddingSpec(family="x", query_style="both")
    with pytest.raises(ConfigError, match="question"):
        EmbeddingSpec(family="x", query_template="no slot")
