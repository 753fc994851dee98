"""Collate preference pairs into reward-model batches: each pair as two sequences, with or
without its image.

A batch of B pairs holds, for each view it is asked for, one `VLMCollator(train=True)` batch of
2B sequences: rows 0..B-1 are the chosen responses, rows B..2B-1 the rejected ones, each the
prompt (image + query) then the response up to its end-of-turn token, right-padded. Views:

- `multimodal`: the pair's image;
- `text`: the image removed, by one of TEXT_MODES: `drop` (no image tokens at all) or `blank` (a
  white image of the same size in its place, what the shortcut-aware paper's release does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from robustvlm.data.collate import VLMCollator
from robustvlm.data.images import load_image
from robustvlm.data.preferences import PreferencePair
from robustvlm.errors import ConfigError, DataError

TEXT_MODES = ("drop", "blank")
_WHITE = (255, 255, 255)


def blank_image(ref: str | bytes, **where: Any) -> Image.Image:
    """A white RGB image of the size of the image `ref` (read with `load_image`, same errors)."""
    return Image.new("RGB", load_image(ref, **where).size, _WHITE)


class PreferenceCollator:
    """Pairs -> {"multimodal": batch, "text": batch (the views asked for), "env": [B] ids,
    "margin": [B] float (0 where a pair has none)}; see the module doc.

    Args:
        processor: the model's processor (with a chat template).
        env_ids: environment name -> id (-1 for one not listed).
        views: which of "multimodal" and "text" to build.
        text_mode: how the text view removes the image (TEXT_MODES).
        max_length: longest sequence in tokens (responses are cut; a longer prompt is an error).
    """

    def __init__(
        self,
        processor: Any,
        env_ids: dict[str, int],
        *,
        views: Sequence[str] = ("multimodal",),
        text_mode: str = "drop",
        max_length: int | None = None,
    ):
        if text_mode not in TEXT_MODES:
            raise ConfigError(f"text mode must be one of {TEXT_MODES}, not {text_mode!r}")
        unknown = set(views) - {"multimodal", "text"}
        if unknown or not views:
            raise ConfigError(f"views must be 'multimodal' and/or 'text', not {list(views)}")
        self.env_ids = dict(env_ids)
        self.views = tuple(views)
        self.text_mode = text_mode
        self.collators = {
            "multimodal": VLMCollator(processor, env_ids, train=True, max_length=max_length),
            "text": VLMCollator(
                processor, env_ids, train=True, max_length=max_length,
                image_loader=blank_image if text_mode == "blank" else load_image,
            ),
        }

    def __call__(self, pairs: Sequence[PreferencePair]) -> dict[str, Any]:
        if not pairs:
            raise DataError("cannot collate an empty batch of pairs")
        batch: dict[str, Any] = {
            "env": torch.tensor([self.env_ids.get(p.env, -1) for p in pairs], dtype=torch.long),
            "margin": torch.tensor([p.margin or 0.0 for p in pairs], dtype=torch.float32),
            "ids": [p.id for p in pairs],
        }
        for view in self.views:
            drop = view == "text" and self.text_mode == "drop"
            examples = [
                p.example(response, image=None) if drop else p.example(response)
                for responses in ([p.chosen for p in pairs], [p.rejected for p in pairs])
                for p, response in zip(pairs, responses)
            ]
            batch[view] = self.collators[view](examples)
        return batch
