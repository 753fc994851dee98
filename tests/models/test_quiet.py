"""Saving a SigLIP model logs no warning about transformers' own default token ids, while an
out-of-range token id of a model's own config is still warned about (issue 46.8)."""

from __future__ import annotations

import logging

from transformers import LlamaConfig

from robustvlm.models.tiny_clip import build_tiny_dual_encoder

WARNING = "must be `None` or an integer within the vocabulary"


def test_a_siglip_save_is_quiet_and_a_real_problem_is_not(tmp_path, caplog):
    model, _ = build_tiny_dual_encoder("siglip", corpus=["a coat"])
    with caplog.at_level(logging.WARNING, logger="transformers.configuration_utils"):
        model.save_pretrained(tmp_path)
        repr(model.config)
        assert not [r for r in caplog.records if WARNING in r.getMessage()]
        LlamaConfig(vocab_size=17, bos_token_id=23)
    assert [r for r in caplog.records if WARNING in r.getMessage() and "got 23" in r.getMessage()]
