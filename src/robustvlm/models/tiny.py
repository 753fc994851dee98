"""Tiny, randomly initialised VLMs built fully offline (tests, demo, benchmarks).

Each tiny model is a real transformers architecture (Idefics3 = SmolVLM, LLaVA) at toy width,
with a byte-level BPE tokenizer trained on the spot and a ChatML chat template, so every code
path (processor, chat template, collate, training, generation, save/load) runs as it would on a
hub model. Image processors are the PIL backends: no torchvision needed.

Default size (`hidden_size=128`, `num_layers=2`, 64x64 images, 16 image tokens, vocabulary of
about 580 tokens on the built-in corpus, at most `vocab_size=1024`): about 0.6M parameters
(0.6M-0.8M with a larger task corpus); a training step at batch 8 takes about 20-30 ms on 2 CPU
cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    Idefics3Config,
    Idefics3ForConditionalGeneration,
    Idefics3ImageProcessorPil,
    Idefics3Processor,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaImageProcessorPil,
    LlavaProcessor,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    ProcessorMixin,
)

from robustvlm.errors import ConfigError

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


@dataclass(frozen=True)
class _Family:
    """How to build one tiny architecture.

    Attributes:
        special_tokens: tokens beyond pad/bos/eos that the processor needs.
        image_text: what the chat template writes for an image (the processor expands it).
        make_config: (tokenizer, sizes) -> model config.
        make_processor: (tokenizer, config, chat template) -> processor matching the config.
        model_class: the ...ForConditionalGeneration class.
    """

    special_tokens: tuple[str, ...]
    image_text: str
    make_config: Callable[[PreTrainedTokenizerFast, dict[str, int]], PreTrainedConfig]
    make_processor: Callable[[PreTrainedTokenizerFast, Any, str], ProcessorMixin]
    model_class: type[PreTrainedModel]


def _text_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> dict[str, Any]:
    hidden = sizes["hidden_size"]
    return dict(
        model_type="llama",
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=sizes["num_layers"],
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def _vision_config(sizes: dict[str, int], patch_size: int) -> dict[str, Any]:
    return dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        image_size=sizes["image_size"],
        patch_size=patch_size,
    )


def _idefics3_config(tokenizer, sizes) -> Idefics3Config:
    return Idefics3Config(
        text_config=_text_config(tokenizer, sizes),
        vision_config=_vision_config(sizes, patch_size=8),
        scale_factor=2,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pad_token_id=tokenizer.pad_token_id,
    )


def _idefics3_processor(tokenizer, config: Idefics3Config, chat_template: str) -> Idefics3Processor:
    vision = config.vision_config
    side = vision.image_size // vision.patch_size
    if vision.image_size % vision.patch_size or side % config.scale_factor:
        raise ConfigError(
            f"tiny idefics3: image_size {vision.image_size} must be a multiple of patch_size "
            f"{vision.patch_size} x scale_factor {config.scale_factor}"
        )
    longest = {"longest_edge": vision.image_size}
    return Idefics3Processor(
        image_processor=Idefics3ImageProcessorPil(
            do_image_splitting=False, size=longest, max_image_size=longest
        ),
        tokenizer=tokenizer,
        # must equal (image_size / patch_size)^2 / scale_factor^2, the model's image_seq_len
        image_seq_len=(side // config.scale_factor) ** 2,
        chat_template=chat_template,
    )


def _llava_config(tokenizer, sizes) -> LlavaConfig:
    vision = dict(model_type="clip_vision_model", projection_dim=64, **_vision_config(sizes, 16))
    return LlavaConfig(
        vision_config=vision,
        text_config=_text_config(tokenizer, sizes),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )


def _llava_processor(tokenizer, config: LlavaConfig, chat_template: str) -> LlavaProcessor:
    side = config.vision_config.image_size
    return LlavaProcessor(
        image_processor=LlavaImageProcessorPil(
            size={"shortest_edge": side}, crop_size={"height": side, "width": side}
        ),
        tokenizer=tokenizer,
        patch_size=config.vision_config.patch_size,
        vision_feature_select_strategy=config.vision_feature_select_strategy,
        num_additional_image_tokens=1,  # the CLS token, dropped by the "default" strategy
        chat_template=chat_template,
    )


FAMILIES: dict[str, _Family] = {
    "idefics3": _Family(
        special_tokens=("<image>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>"),
        image_text="<image>",
        make_config=_idefics3_config,
        make_processor=_idefics3_processor,
        model_class=Idefics3ForConditionalGeneration,
    ),
    "llava": _Family(
        special_tokens=("<image>",),
        image_text="<image>",
        make_config=_llava_config,
        make_processor=_llava_processor,
        model_class=LlavaForConditionalGeneration,
    ),
}


def train_tokenizer(
    texts: Iterable[str], *, vocab_size: int, special_tokens: tuple[str, ...] = ()
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `texts` (plus the built-in corpus).

    `vocab_size` is an upper bound: it counts the 256 byte symbols, the special tokens and the
    merges; a small corpus stops with fewer merges. pad/bos/eos are `<pad>`, `<|im_start|>`,
    `<|im_end|>`; no token is added automatically (the chat template writes them).
    """
    specials = [PAD, BOS, EOS, *special_tokens]
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
        extra_special_tokens=list(special_tokens),
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
        kind: "idefics3" (SmolVLM architecture) or "llava" (CLIP vision tower).
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
    family = FAMILIES.get(kind)
    if family is None:
        raise ConfigError(f"unknown tiny model kind '{kind}'; known: {sorted(FAMILIES)}")
    tokenizer = train_tokenizer(corpus or [], vocab_size=vocab_size, special_tokens=family.special_tokens)
    sizes = {"hidden_size": hidden_size, "num_layers": num_layers, "image_size": image_size}
    config = family.make_config(tokenizer, sizes)
    _apply_overrides(config, overrides, kind)
    processor = family.make_processor(
        tokenizer, config, CHAT_TEMPLATE.replace("{{ IMAGE }}", family.image_text)
    )
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
