"""Tiny, randomly initialised VLMs built fully offline (tests, demo, benchmarks).

Each tiny model is a real transformers architecture (`tiny_families.VLM_FAMILIES`: Idefics3 =
SmolVLM, LLaVA, LLaVA-OneVision, Qwen2-VL, Qwen2.5-VL, Qwen3-VL, InternVL, Gemma 3, PaliGemma)
at toy width, with a byte-level BPE tokenizer trained on the spot and a ChatML chat template, so every code
path (processor, chat template, collate, training, generation, save/load) runs as it would on a
hub model. Image processors are the PIL backends: no torchvision needed.

Default size (`hidden_size=128`, `num_layers=2`, 64x64 images, 16 image tokens, vocabulary of
about 580 tokens on the built-in corpus, at most `vocab_size=1024`): about 0.6M parameters
(0.6M-0.8M with a larger task corpus); a training step at batch 8 takes about 20-30 ms on 2 CPU
cores.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerFast, ProcessorMixin

from robustvlm.errors import ConfigError
from robustvlm.models.image_only import implied_video_config
from robustvlm.models.tiny_families import VLM_FAMILIES

PAD, BOS, EOS = "<pad>", "<|im_start|>", "<|im_end|>"

# One user turn (optional image, then text) and one assistant turn, ChatML style. The generation
# prompt ends with a newline, so the assistant text starts a fresh token and the labelled tokens
# decode to exactly "<target><|im_end|>".
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ IMAGE }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

BUILTIN_CORPUS = [
    "What colour is the shape in the image? red",
    "What colour is the background? green",
    "Which shape is shown? a circle",
    "Which shape is shown? a square",
    "Is there a triangle in the picture? yes",
    "Is there a cross in the picture? no",
    "How many objects are there? one two three four five six seven eight nine ten",
    "Which digit is written in the image? 0 1 2 3 4 5 6 7 8 9",
    "Describe the image in one sentence. A small blue circle on a white background.",
    "Read the text in the image. The quick brown fox jumps over the lazy dog.",
    "What is the value of the highest bar in the chart? 42 percent",
    "Answer with a single word. Options: A, B, C, D. The answer is B.",
    "Explain your reasoning step by step, then give the final answer.",
    "colours: red green blue yellow orange purple black white grey brown pink",
    "shapes: circle square triangle star cross heart diamond rectangle line",
    "document chart table figure page title label axis legend number text",
    "user assistant system question answer image picture photo",
]


def train_tokenizer(
    texts: Iterable[str], *, vocab_size: int, special_tokens: tuple[str, ...] = (),
    named_tokens: dict[str, str] | None = None,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `texts` (plus the built-in corpus).

    `vocab_size` is an upper bound: it counts the 256 byte symbols, the special tokens and the
    merges; a small corpus stops with fewer merges. pad/bos/eos are `<pad>`, `<|im_start|>`,
    `<|im_end|>`; no token is added automatically (the chat template writes them).
    `named_tokens` (attribute name -> token) are special tokens the tokenizer also exposes by
    name (`tokenizer.<name>`, `tokenizer.<name>_id`), as processors of some families expect.
    """
    named_tokens = named_tokens or {}
    specials = [PAD, BOS, EOS, *special_tokens, *named_tokens.values()]
    if vocab_size < 256 + len(specials) + 16:
        raise ConfigError(f"tiny tokenizer: vocab_size {vocab_size} is below {256 + len(specials) + 16}")
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator([*BUILTIN_CORPUS, *texts], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        extra_special_tokens=named_tokens or list(special_tokens),
    )


def build_tiny_vlm(
    kind: str,
    *,
    seed: int = 0,
    corpus: list[str] | None = None,
    vocab_size: int = 1024,
    hidden_size: int = 128,
    num_layers: int = 2,
    image_size: int = 64,
    **overrides: Any,
) -> tuple[PreTrainedModel, ProcessorMixin]:
    """Build a tiny random VLM and its processor offline.

    Args:
        kind: a key of `VLM_FAMILIES`, transformers' `model_type`: "idefics3" (SmolVLM), "llava",
            "llava_onevision", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "internvl" (the -hf layout),
            "gemma3", "paligemma".
        seed: seeds the weight initialisation (the global RNG is left untouched).
        corpus: extra tokenizer training text (instructions and targets of the task).
        vocab_size: tokenizer vocabulary upper bound (the main cost at this width).
        hidden_size: text decoder width; num_layers: text decoder depth.
        image_size: square input side in pixels (16 image tokens at 64).
        **overrides: config attributes: `text_<name>` sets the text config, `vision_<name>` the
            vision config, any other name the top-level config. Unknown names are a ConfigError.

    Returns:
        (model in float32 train mode, processor).
    """
    family = VLM_FAMILIES.get(kind)
    if family is None:
        raise ConfigError(f"unknown tiny model kind '{kind}'; known: {sorted(VLM_FAMILIES)}")
    tokenizer = train_tokenizer(corpus or [], vocab_size=vocab_size, special_tokens=family.special_tokens,
                                named_tokens=family.named_tokens)
    sizes = {"hidden_size": hidden_size, "num_layers": num_layers, "image_size": image_size}
    config = family.make_config(tokenizer, sizes)
    _apply_overrides(config, overrides, kind)
    processor = family.make_processor(
        tokenizer, config, CHAT_TEMPLATE.replace("{{ IMAGE }}", family.image_text)
    )
    if hasattr(processor, "video_processor_dict"):  # built without its video processor (image_only)
        processor.video_processor_dict = implied_video_config(processor.image_processor, family.video_processor)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = family.model_class(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model.train(), processor


def _apply_overrides(config: PreTrainedConfig, overrides: dict[str, Any], kind: str) -> None:
    for key, value in overrides.items():
        target, name = config, key
        for prefix in ("text_", "vision_"):
            if key.startswith(prefix):
                target, name = getattr(config, f"{prefix}config"), key[len(prefix):]
        if not hasattr(target, name):
            raise ConfigError(f"tiny {kind}: unknown config override '{key}'")
        setattr(target, name, value)
