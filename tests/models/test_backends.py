"""The backend registry: families, loading, capability errors, operations against direct
computations, and mc scoring chosen by capability."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models import text_encoder
from robustvlm.models.backends import (
    BACKENDS,
    CAPABILITIES,
    BackendSpec,
    DualEncoderBackend,
    VLMBackend,
    dual_encoder,
    infer_family,
    load_backend,
)
from robustvlm.models.loglik import option_logliks
from robustvlm.models.text_encoder import load_text_encoder
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.scoring import make_scorer, scoring_method

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def vlm(tiny_backends):
    return tiny_backends("idefics3")


@pytest.fixture(scope="module", params=["clip", "siglip"])
def dual(request, tiny_backends):
    return tiny_backends(request.param)


def _question() -> MCQuestion:
    buf = io.BytesIO()
    Image.new("RGB", (48, 48), (200, 40, 10)).save(buf, format="PNG")
    return MCQuestion(id="q1", image=buf.getvalue(), question="", options=["dog", "cat", "star"], answer=0,
                      source="test", dataset_class="dog", prompt="What type of object is in this photo?")


def test_registry_declares_known_capabilities():
    assert list(BACKENDS) == ["vlm", "clip", "siglip", "reward", "vlm2vec-vqa", "vlm2vec-caption", "vlm2vec-mixed",
                             "openai"]
    for spec in BACKENDS.values():
        assert spec.capabilities and spec.capabilities <= set(CAPABILITIES)
    assert BACKENDS["vlm"].capabilities == {"generate", "option_loglik", "image_embed"}


def test_each_family_module_is_imported_when_a_model_of_it_loads():
    import subprocess
    import sys

    code = ("import sys, robustvlm.models.backends as b; from robustvlm.model_ref import ModelRef; "
            "before = {m for m in sys.modules if m.startswith('robustvlm.models.backends.')}; "
            "b.load_backend(ModelRef.tiny('clip')); "
            "print(sorted(before), sorted(m for m in sys.modules if m.startswith('robustvlm.models.backends.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("] [") == ["['robustvlm.models.backends.base'",
                                "'robustvlm.models.backends.base', 'robustvlm.models.backends.dual_encoder']\n"]


def test_a_family_named_by_path_and_a_path_that_is_no_backend(monkeypatch):
    monkeypatch.setitem(BACKENDS, "by-path", BackendSpec("robustvlm.models.backends.dual_encoder:DualEncoderBackend",
                                                         frozenset({"image_embed", "text_embed"})))
    assert isinstance(load_backend(ModelRef.parse("tiny:clip"), "by-path", corpus=["a cat"]), DualEncoderBackend)
    monkeypatch.setitem(BACKENDS, "broken", BackendSpec("robustvlm.errors:ConfigError", frozenset({"reward"})))
    with pytest.raises(ConfigError, match="backend 'robustvlm.errors:ConfigError' is not a Backend class"):
        load_backend(ModelRef.parse("tiny:clip"), "broken")


def test_load_backend_gives_the_family_class_in_eval_mode(vlm, dual):
    assert isinstance(vlm, VLMBackend) and vlm.family == "vlm" and not vlm.model.training
    assert isinstance(dual, DualEncoderBackend) and dual.family == dual.name.split(":")[1]
    assert not dual.model.training


def test_unsupported_operation_names_model_family_and_capabilities(vlm, tiny_backends):
    clip = tiny_backends("clip")
    with pytest.raises(ConfigError, match=r"model 'tiny:clip' \(family 'clip'\) does not support "
                                          r"generate; it supports image_embed, text_embed"):
        clip.generate({})
    with pytest.raises(ConfigError, match="does not support option_loglik"):
        clip.option_logliks([], ["a"])
    with pytest.raises(ConfigError, match=r"'tiny:idefics3' \(family 'vlm'\) does not support text_embed; "
                                          r"it supports generate, option_loglik, image_embed"):
        vlm.embed_texts(["a dog"])
    with pytest.raises(ConfigError, match="unknown capabilities"):
        vlm.supports("segment")


def test_unknown_family_and_unloadable_models(tmp_path):
    with pytest.raises(ConfigError, match="family must be one of"):
        load_backend(ModelRef.parse("tiny:clip"), "segmenter")
    with pytest.raises(ConfigError, match="cannot load dual encoder"):
        load_backend(ModelRef.folder(tmp_path / "missing"), "clip")
    with pytest.raises(ConfigError, match="unknown tiny"):
        load_backend(ModelRef.parse("tiny:nothing"))


def test_a_folder_without_a_config_names_itself_when_its_family_is_inferred(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=f"cannot read the config of model '{tmp_path / 'empty'}' to infer its family"):
        infer_family(ModelRef.folder(tmp_path / "empty"))


@pytest.mark.parametrize(("module", "classes", "load"), [
    (dual_encoder, ("AutoModel", "AutoProcessor"), lambda **kw: load_backend(ModelRef.parse("org/clip"), "clip", **kw)),
    (text_encoder, ("AutoModel", "AutoTokenizer"), lambda **kw: load_text_encoder("org/encoder", **kw)),
])
def test_remote_code_only_when_asked(monkeypatch, module, classes, load):
    """Dual encoders (here) and text encoders pass trust_remote_code only when it is True."""
    calls = []

    def record(name, **kwargs):
        calls.append(kwargs)
        return torch.nn.Linear(1, 1)

    for cls in classes:
        monkeypatch.setattr(getattr(module, cls), "from_pretrained", record)
    load()
    load(trust_remote_code=True)
    assert calls == [{}, {}, {"trust_remote_code": True}, {"trust_remote_code": True}]


def test_embed_texts_is_the_normalised_text_tower_output(dual):
    texts = ["a photo of a dog", "star", "a small red circle"]
    got = dual.embed_texts(texts)
    tokenizer, model = dual.processor.tokenizer, dual.model
    for text, row in zip(texts, got):  # one text at a time, through the tower's own modules
        if dual.family == "siglip":
            ids = tokenizer([text], padding="max_length", max_length=model.config.text_config.max_position_embeddings,
                            return_tensors="pt")["input_ids"]
            with torch.no_grad():
                emb = model.text_model(input_ids=ids).pooler_output[0]
        else:
            enc = tokenizer([text], return_tensors="pt")
            with torch.no_grad():
                emb = model.text_projection(model.text_model(**enc).pooler_output)[0]
        np.testing.assert_allclose(row, F.normalize(emb, dim=-1).numpy(), atol=1e-5)


def test_vlm_operations_call_the_model_operations(vlm):
    messages = [{"role": "user", "content": [{"type": "text", "text": "Name a shape."}]}]
    got = vlm.option_logliks(messages, ["circle", "star"])
    assert got == option_logliks(vlm.model, vlm.processor, messages, ["circle", "star"])
    raw = vlm.embed_images([Image.new("RGB", (64, 64), (9, 99, 199))], normalize=False)
    assert raw.shape == (1, vlm.model.config.text_config.hidden_size)


def test_mc_scoring_follows_capabilities(vlm, tiny_backends, monkeypatch):
    q = _question()
    clip = tiny_backends("clip")
    assert scoring_method("clip", "generate") == "similarity"
    assert set(make_scorer(clip, way="similarity", normalize=True)([q])[0]) == {"prediction", "scores"}
    assert scoring_method("vlm", "loglik") == "loglik" and scoring_method("vlm", "generate") == "generate"
    assert "n_tokens" in make_scorer(vlm, way="loglik", normalize=True)([q])[0]
    assert "response" in make_scorer(vlm, way="generate", normalize=True)([q])[0]
    # a family that only embeds texts (one registry entry) can score questions in no way
    monkeypatch.setitem(BACKENDS, "text_only", BackendSpec(DualEncoderBackend, frozenset({"text_embed"})))
    with pytest.raises(ConfigError, match="does not support option_loglik; it supports text_embed"):
        scoring_method("text_only", "loglik")
    with pytest.raises(ConfigError, match="does not support option_loglik"):
        make_scorer(clip, way="loglik", normalize=True)
