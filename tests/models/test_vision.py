"""Vision-tower image embeddings against direct computations with the models' own modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models import build_tiny_vlm
from robustvlm.models.vision import VisionTowerEmbedder, pool_image_features
from robustvlm.workflows.measure.mc_build import load_image_embedder

torch.set_num_threads(1)


def images(sizes: list[tuple[int, int]], seed: int = 0) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)) for w, h in sizes]


@pytest.mark.parametrize("name", ["tiny:clip", "tiny:siglip"])
def test_dual_encoder_embedding_is_the_normalised_image_feature(name, tiny_backends):
    backend = tiny_backends(name.removeprefix("tiny:"))
    pics = images([(40, 30), (32, 32), (50, 60), (32, 32), (20, 44)])
    got = backend.embed_images(pics, batch_size=2)
    assert got.dtype == np.float32 and got.shape[0] == 5
    pixels = backend.processor.image_processor(images=pics, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        out = backend.model.get_image_features(pixel_values=pixels)
    direct = out if torch.is_tensor(out) else out.pooler_output
    np.testing.assert_allclose(got, F.normalize(direct, dim=-1).numpy(), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_idefics3_embedding_is_the_mean_connector_token(tiny_backends):
    backend = tiny_backends("idefics3")
    pics = images([(64, 64), (64, 64)], seed=1)
    inner = backend.model.model
    pixels = torch.stack([
        backend.processor.image_processor(images=[p], return_tensors="pt")["pixel_values"][0, 0] for p in pics
    ])
    with torch.no_grad():
        tokens = inner.connector(inner.vision_model(pixel_values=pixels).last_hidden_state)  # [n, t, d]
    np.testing.assert_allclose(backend.embed_images(pics), F.normalize(tokens.mean(dim=1), dim=-1).numpy(),
                               atol=1e-5)


def test_split_image_is_the_mean_over_its_crops():
    """Idefics3 with image splitting: an image's raw embedding is the mean over its crops of the
    crop's mean connector token (each crop run alone here); normalised = raw / its norm."""
    model, processor = build_tiny_vlm("idefics3")
    processor.image_processor.do_image_splitting = True
    processor.image_processor.max_image_size = {"longest_edge": 32}
    pics = images([(48, 64)], seed=4)
    crops = processor.image_processor(images=pics, return_tensors="pt")["pixel_values"][0]
    assert len(crops) > 1
    inner = model.eval().model
    with torch.no_grad():
        per_crop = [inner.connector(inner.vision_model(pixel_values=c[None]).last_hidden_state).mean(dim=(0, 1))
                    for c in crops]
    raw = VisionTowerEmbedder(model, processor, normalize=False)(pics)
    np.testing.assert_allclose(raw[0], torch.stack(per_crop).mean(dim=0).numpy(), atol=1e-5)
    unit = VisionTowerEmbedder(model, processor)(pics)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)


def test_llava_embedding_is_the_mean_projected_patch(tiny_backends):
    backend = tiny_backends("llava")
    model, pics = backend.model, images([(64, 64), (48, 80)], seed=2)
    pixels = backend.processor.image_processor(images=pics, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        hidden = model.model.vision_tower(pixels, output_hidden_states=True).hidden_states
        patches = hidden[model.config.vision_feature_layer][:, 1:]  # "default": CLS dropped
        projected = model.model.multi_modal_projector(patches)
    assert model.config.vision_feature_select_strategy == "default"
    np.testing.assert_allclose(backend.embed_images(pics), F.normalize(projected.mean(dim=1), dim=-1).numpy(),
                               atol=1e-5)


@pytest.mark.parametrize("name", ["tiny:clip", "tiny:idefics3"])
def test_embeddings_do_not_depend_on_the_batch(name):
    pics = images([(30, 40), (64, 64), (33, 17), (64, 64), (80, 20)], seed=3)
    batched = load_image_embedder(ModelRef.parse(name), batch_size=3)(pics)
    alone = np.concatenate([load_image_embedder(ModelRef.parse(name), batch_size=1)([p]) for p in pics])
    np.testing.assert_allclose(batched, alone, atol=1e-5)


def test_pooling_shapes_and_bad_models():
    rng = torch.Generator().manual_seed(0)
    tokens = torch.randn(3, 5, 4, generator=rng)
    torch.testing.assert_close(pool_image_features(tokens), tokens.mean(dim=1))
    torch.testing.assert_close(pool_image_features(list(tokens)), tokens.mean(dim=1))
    torch.testing.assert_close(pool_image_features(tokens[:, 0]), tokens[:, 0])
    with pytest.raises(ConfigError, match="cannot pool"):
        pool_image_features(torch.zeros(2))
    with pytest.raises(ConfigError, match="get_image_features"):
        VisionTowerEmbedder(torch.nn.Linear(2, 2), None)
    with pytest.raises(ConfigError, match="unknown tiny"):
        load_image_embedder(ModelRef.parse("tiny:nothing"))
