"""Tiny, randomly initialised dual encoders (CLIP, SigLIP) built fully offline for tests.

Each is the real transformers architecture at toy width with a word-level tokenizer built on
the spot (lower-cased words and punctuation of a small corpus, unknown words -> `<unk>`) and
the PIL image processor of its family, so no download and no torchvision is needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import (
    CLIPConfig,
    CLIPImageProcessorPil,
    CLIPModel,
    CLIPProcessor,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    ProcessorMixin,
    SiglipConfig,
    SiglipImageProcessorPil,
    SiglipModel,
    SiglipProcessor,
)

from robustvlm.errors import ConfigError
from robustvlm.models.quiet import silence_siglip_default_token_warning

silence_siglip_default_token_warning()  # transformers warns about its own SigLIP defaults on every save

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
CORPUS = (
    "a photo of the . , dog cat bird fish horse car truck plane ship frog deer "
    "circle square triangle star cross heart red green blue small large image picture"
)
IMAGE_SIZE = 32
MAX_TEXT_LENGTH = 16


def word_tokenizer(texts: Iterable[str] = ()) -> PreTrainedTokenizerFast:
    """A lower-casing word-level tokenizer over `texts` + the built-in corpus; every encoding is
    `<bos> words <eos>` (CLIP pools the text at the first `<eos>`)."""
    pre = pre_tokenizers.Whitespace()
    words = sorted({w for text in (CORPUS, *texts) for w, _ in pre.pre_tokenize_str(text.lower())})
    vocab = {tok: i for i, tok in enumerate([PAD, UNK, BOS, EOS, *words])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}", special_tokens=[(BOS, vocab[BOS]), (EOS, vocab[EOS])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD, unk_token=UNK, bos_token=BOS, eos_token=EOS,
        model_max_length=MAX_TEXT_LENGTH,
    )


def _tower_sizes(tokenizer: PreTrainedTokenizerFast, sizes: TowerSizes) -> tuple[dict, dict]:
    text = dict(
        vocab_size=len(tokenizer), hidden_size=sizes.width, intermediate_size=2 * sizes.width,
        num_hidden_layers=sizes.depth, num_attention_heads=4, max_position_embeddings=MAX_TEXT_LENGTH,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    vision = dict(
        hidden_size=sizes.vision_width, intermediate_size=2 * sizes.vision_width,
        num_hidden_layers=sizes.vision_depth, num_attention_heads=4, image_size=sizes.image_size,
        patch_size=sizes.patch_size,
    )
    return text, vision


@dataclass(frozen=True)
class TowerSizes:
    """Tower widths and depths, the square image side and patch side (pixels), the CLIP
    projection width. The defaults are the test models' toy sizes."""

    width: int = 32
    depth: int = 2
    vision_width: int = 32
    vision_depth: int = 2
    image_size: int = IMAGE_SIZE
    patch_size: int = 8
    projection_dim: int = 16


DUAL_ENCODER_KINDS = ("clip", "siglip")


def build_tiny_dual_encoder(
    kind: str, *, seed: int = 0, corpus: Iterable[str] = (), sizes: TowerSizes = TowerSizes()
) -> tuple[PreTrainedModel, ProcessorMixin]:
    """A tiny random dual encoder: kind "clip" (`CLIPModel`) or "siglip" (`SiglipModel`), of
    `sizes` (the model zoo sets them; tests keep the defaults)."""
    tokenizer = word_tokenizer(corpus)
    text, vision = _tower_sizes(tokenizer, sizes)
    side = {"height": sizes.image_size, "width": sizes.image_size}
    if kind == "clip":
        config: PreTrainedConfig = CLIPConfig(text_config=text, vision_config=vision,
                                              projection_dim=sizes.projection_dim)
        image_processor = CLIPImageProcessorPil(size={"shortest_edge": sizes.image_size}, crop_size=side)
        processor: ProcessorMixin = CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)
        model_class: type[PreTrainedModel] = CLIPModel
    elif kind == "siglip":
        config = SiglipConfig(text_config=text, vision_config=vision)
        processor = SiglipProcessor(image_processor=SiglipImageProcessorPil(size=side), tokenizer=tokenizer)
        model_class = SiglipModel
    else:
        raise ConfigError(f"unknown tiny dual encoder '{kind}'; known: {list(DUAL_ENCODER_KINDS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config)
    return model.eval(), processor
