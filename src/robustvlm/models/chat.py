"""Chat prompts: what every generating command asks a model, local or served.

A `ChatPrompt` is chat messages (an `{"type": "image"}` content entry per image, in order) and
their images. A local model encodes a list of them with its processor into one left-padded
generation batch (`encode_chats`); a served model sends each as a chat-completions request
(`models.served`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from PIL import Image

from robustvlm.data.prompt_inputs import processor_tensors
from robustvlm.errors import ConfigError


@dataclass(frozen=True)
class ChatPrompt:
    """One prompt: `messages` up to the assistant's turn, `images` in the order of their entries;
    `record` names it in errors (a record id)."""

    messages: list[dict]
    images: list[Image.Image] = field(default_factory=list)
    record: str = "the prompt"


def encode_chats(processor: Any, prompts: Sequence[ChatPrompt]) -> dict[str, torch.Tensor]:
    """The processor's left-padded batch of `prompts`, each rendered by the chat template up to
    the generation prompt; row i carries prompt i's images (no image argument when no prompt has
    one)."""
    if getattr(processor, "chat_template", None) is None:
        raise ConfigError(f"{type(processor).__name__} has no chat template; chat prompts need one")
    texts = [processor.apply_chat_template(p.messages, add_generation_prompt=True, tokenize=False) for p in prompts]
    images = [list(p.images) for p in prompts]
    return processor_tensors(processor(text=texts, images=images if any(images) else None, padding=True,
                                       padding_side="left", return_tensors="pt"))


def check_multi_image(processor: Any) -> None:
    """Raise ConfigError unless the processor expands two images in one prompt into two images.

    Compares prompt lengths with 0 to 3 image entries: one image must add tokens, and from two
    images on each image must add the same positive number (a lone image may be expanded
    differently: LLaVA-OneVision tiles it, and gives each of several images its base view only).
    """
    blank = Image.new("RGB", (32, 32))
    lengths = []
    for n in range(4):
        content = [{"type": "image"}] * n + [{"type": "text", "text": "x"}]
        text = processor.apply_chat_template(
            [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
        )
        try:
            enc = processor(text=[text], images=[[blank] * n] if n else None, return_tensors="pt")
        except (ValueError, TypeError, RuntimeError) as exc:
            raise ConfigError(
                f"{type(processor).__name__} cannot take {n} images in one prompt ({exc}); "
                "in-context evaluation needs a model that accepts several images"
            ) from exc
        lengths.append(enc["input_ids"].shape[1])
    per_image = lengths[3] - lengths[2]
    if lengths[1] <= lengths[0] or per_image <= 0 or lengths[2] - lengths[0] != 2 * per_image:
        raise ConfigError(
            f"{type(processor).__name__} does not expand several images in one prompt (prompt "
            f"lengths with 0/1/2/3 images: {lengths}); in-context evaluation needs a multi-image model"
        )
