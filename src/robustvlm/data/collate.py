"""Turn Examples into model batches: chat template, processor, answer-only labels, env ids.

A training sequence is the processor's encoding of the prompt (user turn + assistant
generation prompt, exactly what the model sees at generation time) followed by the tokens of
the assistant's reply as the chat template writes it, cut after its end-of-turn token (the EOS
token is appended when the template writes none). Only the reply tokens carry labels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from PIL import Image

from robustvlm.data.images import load_image
from robustvlm.data.prompt_inputs import appended_token_values, processor_tensors
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError, DataError

IGNORE_INDEX = -100


class VLMCollator:
    """Collate `Example`s for a processor's model family (Idefics3/SmolVLM, LLaVA, Qwen2-VL, ...).

    Args:
        processor: the model's processor, with a chat template.
        env_ids: environment name -> id; an environment not listed gets id -1.
        train: True: `labels` (answer tokens); False: prompt only, with the generation prompt.
        padding_side: "right" or "left"; default right when training, left (for generation)
            otherwise.
        max_length: longest sequence in tokens; longer answers are cut, a longer prompt is a
            DataError (cutting it would cut image tokens).
        image_loader: `load_image`-compatible callable (ref, source=, record=) -> PIL image.

    Returns (from `__call__`): a dict with the processor's model inputs (`input_ids` [B, T],
    `attention_mask` [B, T], `pixel_values`, and family extras such as `pixel_attention_mask`,
    `image_grid_thw`, `mm_token_type_ids`), `labels` [B, T] in train mode (-100 except answer
    tokens and the end-of-turn token), `env` LongTensor [B] and `ids` list[str].
    """

    def __init__(
        self,
        processor: Any,
        env_ids: dict[str, int],
        *,
        train: bool = True,
        padding_side: str | None = None,
        max_length: int | None = None,
        image_loader: Callable[..., Image.Image] = load_image,
    ):
        if getattr(processor, "chat_template", None) is None:
            raise ConfigError(f"{type(processor).__name__} has no chat template; VLMCollator needs one")
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.env_ids = dict(env_ids)
        self.train = train
        self.side = padding_side or ("right" if train else "left")
        if self.side not in ("right", "left"):
            raise ConfigError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
        self.max_length = max_length
        self.image_loader = image_loader
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.tokenizer.eos_token_id
        self.appended = appended_token_values(processor)
        if self.pad_id is None:
            raise ConfigError(f"{type(self.tokenizer).__name__} has neither a pad nor an eos token")

    def __call__(self, examples: list[Example]) -> dict[str, Any]:
        if not examples:
            raise DataError("cannot collate an empty batch")
        prompts = [self._render(ex, with_answer=False) for ex in examples]
        encoded = processor_tensors(self._encode_prompts(examples, prompts))
        mask = encoded.pop("attention_mask").bool()
        token_keys = [k for k, v in encoded.items() if torch.is_tensor(v) and v.shape == mask.shape]
        rows = [{k: encoded[k][i][mask[i]] for k in token_keys} for i in range(len(examples))]
        for ex, row in zip(examples, rows):
            self._check_prompt_length(ex, len(row["input_ids"]))
        labels = None
        if self.train:
            replies = [self._reply_ids(ex, prompt) for ex, prompt in zip(examples, prompts)]
            labels = [self._append_reply(row, reply) for row, reply in zip(rows, replies)]
        batch: dict[str, Any] = {k: v for k, v in encoded.items() if k not in token_keys}
        for key in token_keys:
            batch[key] = _pad([r[key] for r in rows], self.pad_id if key == "input_ids" else 0, self.side)
        lengths = [len(r["input_ids"]) for r in rows]
        batch["attention_mask"] = _pad([torch.ones(n, dtype=torch.long) for n in lengths], 0, self.side)
        if labels is not None:
            batch["labels"] = _pad(labels, IGNORE_INDEX, self.side)
        batch["env"] = torch.tensor([self.env_ids.get(ex.env, -1) for ex in examples], dtype=torch.long)
        batch["ids"] = [ex.id for ex in examples]
        return batch

    def _encode_prompts(self, examples: list[Example], prompts: list[str]) -> dict[str, Any]:
        """The processor's padded encoding of the prompts with their images (one or none each)."""
        images = [
            [self.image_loader(ex.image, source=ex.source, record=ex.id)] if ex.image is not None else []
            for ex in examples
        ]
        return self.processor(
            text=prompts, images=images if any(images) else None, padding=True, return_tensors="pt"
        )

    def _render(self, ex: Example, *, with_answer: bool) -> str:
        """The chat-template text of the user turn, then the reply or the generation prompt."""
        return render_chat(
            self.processor, ex.instruction, image=ex.image is not None,
            answer=ex.target if with_answer else None,
        )

    def _reply_ids(self, ex: Example, prompt: str) -> list[int]:
        """Token ids of the assistant reply up to and including its end-of-turn token."""
        return reply_ids(self.processor, prompt, self._render(ex, with_answer=True), ex.id)

    def _check_prompt_length(self, ex: Example, n_prompt: int) -> None:
        room = 1 if self.train else 0  # a training sequence needs at least one answer token
        if self.max_length is not None and n_prompt + room > self.max_length:
            raise DataError(
                f"prompt is {n_prompt} tokens (with image tokens), over max_length {self.max_length}",
                ex.source,
                ex.id,
            )

    def _append_reply(self, row: dict[str, torch.Tensor], reply: list[int]) -> torch.Tensor:
        """Extend the row's token tensors by the reply in place; return the row's labels."""
        n_prompt = len(row["input_ids"])
        if self.max_length is not None:
            reply = reply[: self.max_length - n_prompt]
        tokens = torch.tensor(reply, dtype=row["input_ids"].dtype)
        for key, values in row.items():
            fill = self.appended.get(key, 0)
            extra = tokens if key == "input_ids" else torch.full((len(reply),), fill, dtype=values.dtype)
            row[key] = torch.cat([values, extra])
        return torch.cat([torch.full((n_prompt,), IGNORE_INDEX, dtype=torch.long), tokens.long()])


def chat_messages(instruction: str, *, image: bool, answer: str | None = None) -> list[dict]:
    """One user turn (an image entry first when `image`, then the text) and, with `answer`,
    the assistant's reply: the messages every prompt of robustvlm is rendered from."""
    user: list[dict] = [{"type": "text", "text": instruction}]
    if image:
        user.insert(0, {"type": "image"})
    messages = [{"role": "user", "content": user}]
    if answer is not None:
        messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    return messages


def render_chat(processor: Any, instruction: str, *, image: bool, answer: str | None = None) -> str:
    """The chat-template text of `chat_messages`: up to the generation prompt without `answer`,
    the whole conversation with it."""
    return processor.apply_chat_template(
        chat_messages(instruction, image=image, answer=answer),
        add_generation_prompt=answer is None, tokenize=False,
    )


def reply_ids(processor: Any, prompt: str, full: str, record: str = "") -> list[int]:
    """Token ids of the reply that `full` (prompt + reply, as `render_chat` writes them) adds to
    `prompt`, up to and including its end-of-turn token (the eos token is appended when the
    template writes none). Training sequences and reward scoring both end with these tokens."""
    tokenizer = processor.tokenizer
    if not full.startswith(prompt):
        raise ConfigError(
            "the chat template does not render the conversation as prompt + reply "
            f"(record {record}); cannot locate the answer tokens"
        )
    ids = tokenizer(full[len(prompt):].rstrip(), add_special_tokens=False)["input_ids"]
    if not ids or ids[-1] not in tokenizer.all_special_ids:
        if tokenizer.eos_token_id is None:
            raise ConfigError("the chat template ends a reply with no end token and there is no eos token")
        ids.append(tokenizer.eos_token_id)
    return ids


def _pad(rows: list[torch.Tensor], value: int, side: str) -> torch.Tensor:
    """Stack 1-D tensors into [B, max length], filling with `value` on `side`."""
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        if side == "right":
            out[i, : len(r)] = r
        else:
            out[i, width - len(r):] = r
    return out
