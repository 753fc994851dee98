"""Real-size VLMs with random weights, built offline: `real:<name>` models for timing and memory.

Each entry of `REAL_MODELS` is a released checkpoint's architecture at its published size: the
vision tower, the connector, the text decoder, the vocabulary and the image-token count per crop
as the checkpoint's `config.json` (and `preprocessor_config.json`) have them. Only the weights
are random, which is all a step-time or memory figure needs. The tokenizer is a byte-level BPE
trained on the spot (`tiny.train_tokenizer`) and padded with never-produced filler tokens to the
published vocabulary size, so the embedding and the LM head have their real shapes; token ids
(and the chat template, ChatML as for `tiny:` models) are not the released ones, which does not
matter for cost. `PUBLISHED_PARAMETERS` holds the parameter count each release publishes;
tests/models/test_real.py builds every model on the meta device (no memory) and checks its
count within 1%.

Sources (values in the specs below, per model):
- smolvlm-256m: huggingface.co/HuggingFaceTB/SmolVLM-256M-Instruct, config.json and
  preprocessor_config.json; model card ("64 visual tokens to encode image patches of size
  512x512", SigLIP base patch-16/512 93M vision encoder, SmolLM2-135M decoder); 256M parameters
  (hub model size).
- smolvlm-2.2b: huggingface.co/HuggingFaceTB/SmolVLM-Instruct, config.json and
  preprocessor_config.json; model card ("81 visual tokens to encode image patches of size
  384x384", SigLIP so400m-patch14-384, SmolLM2-1.7B decoder); 2.25B parameters (hub model size).
- qwen2-vl-2b: huggingface.co/Qwen/Qwen2-VL-2B-Instruct, config.json and
  preprocessor_config.json (min_pixels 3136, max_pixels 12845056, patch 14, merge 2);
  parameter count from model.safetensors.index.json, total_size 4,417,971,200 bytes in bf16 =
  2,208,985,600 parameters (tied embeddings: no separate LM head stored).
- llava-onevision-0.5b: huggingface.co/llava-hf/llava-onevision-qwen2-0.5b-ov-hf, config.json
  and preprocessor_config.json (SigLIP so400m with 26 layers, Qwen2-0.5B decoder, anyres_max_9,
  729 tokens per 384x384 crop); 894M parameters (hub model size).

Written here rather than loaded with `AutoConfig.from_pretrained` because nothing can be
downloaded: the values are transcribed, and the parameter-count test is their check.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
from tokenizers import Tokenizer
from transformers import (
    Idefics3Config,
    Idefics3ImageProcessorPil,
    Idefics3Processor,
    LlavaOnevisionConfig,
    LlavaOnevisionImageProcessorPil,
    LlavaOnevisionProcessor,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    ProcessorMixin,
    Qwen2VLConfig,
    Qwen2VLImageProcessorPil,
    Qwen2VLProcessor,
)

from robustvlm.errors import ConfigError
from robustvlm.model_ref import REAL, ModelRef
from robustvlm.models.image_only import image_only
from robustvlm.models.tiny import CHAT_TEMPLATE, train_tokenizer
from robustvlm.models.tiny_families import QWEN_TOKENS, VLM_FAMILIES


@dataclass(frozen=True)
class RealSpec:
    """One released architecture.

    Attributes:
        kind: the `tiny_families.VLM_FAMILIES` key of its architecture (transformers' model_type).
        hub_name: the release it copies.
        vocab_size: the text config's vocabulary size (embedding and LM head rows).
        make_config: tokenizer -> the model config (special-token ids from the tokenizer).
        make_processor: (tokenizer, config, chat template, image_splitting) -> processor.
        published_parameters: the release's published parameter count.
    """

    kind: str
    hub_name: str
    vocab_size: int
    make_config: Callable[[PreTrainedTokenizerFast], PreTrainedConfig]
    make_processor: Callable[[PreTrainedTokenizerFast, Any, str, bool], ProcessorMixin]
    published_parameters: int


def _id(tokenizer: PreTrainedTokenizerFast, token: str) -> int:
    return cast(int, tokenizer.convert_tokens_to_ids(token))  # one token (a str): one id


def _special_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, Any]:
    return {"pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id}


# ---- SmolVLM (Idefics3): SigLIP tower, pixel-shuffle connector, Llama (SmolLM2) decoder --------

def _idefics3(text: dict[str, Any], vision: dict[str, Any], scale_factor: int) -> Callable[..., Idefics3Config]:
    def make(tokenizer: PreTrainedTokenizerFast) -> Idefics3Config:
        untyped: dict[str, Any] = {"pad_token_id": tokenizer.pad_token_id}
        return Idefics3Config(
            text_config={"model_type": "llama", **text, **_special_ids(tokenizer)},
            vision_config=vision, scale_factor=scale_factor,
            image_token_id=_id(tokenizer, "<image>"), tie_word_embeddings=False, **untyped,
        )
    return make


def _idefics3_processor(tokenizer: PreTrainedTokenizerFast, config: Idefics3Config, chat_template: str, splitting: bool) -> ProcessorMixin:
    """The released processor: images resized to 4 crops a side and split into crops of the
    tower's image size plus a global view (`splitting`), each crop (side / patch / scale)^2 tokens;
    without splitting, one crop per image."""
    vision: Any = config.vision_config  # a built config's vision sub-config
    side = vision.image_size
    tokens = (side // vision.patch_size // config.scale_factor) ** 2
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=splitting, size={"longest_edge": (4 if splitting else 1) * side},
        max_image_size={"longest_edge": side},
    )
    return Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer, image_seq_len=tokens,
                             chat_template=chat_template)


SMOLVLM_256M_TEXT = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, head_dim=64, vocab_size=49280, rms_norm_eps=1e-5,
                         rope_theta=100000.0, max_position_embeddings=8192, tie_word_embeddings=False)
SMOLVLM_256M_VISION = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                           image_size=512, patch_size=16)
SMOLVLM_2B_TEXT = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
                       num_key_value_heads=32, vocab_size=49155, rms_norm_eps=1e-5, rope_theta=273768.0,
                       max_position_embeddings=16384, tie_word_embeddings=False)
SMOLVLM_2B_VISION = dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
                         image_size=384, patch_size=14)


# ---- Qwen2-VL: ViT with 2x2 patch merger, Qwen2 decoder with multimodal rotary positions -------

def _qwen2_vl_2b(tokenizer: PreTrainedTokenizerFast) -> Qwen2VLConfig:
    ids: dict[str, Any] = {f"{name}_id": _id(tokenizer, token) for name, token in QWEN_TOKENS.items()}
    return Qwen2VLConfig(
        text_config=dict(
            model_type="qwen2_vl_text", hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
            num_attention_heads=12, num_key_value_heads=2, vocab_size=151936, rms_norm_eps=1e-6,
            max_position_embeddings=32768, tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]},
            **_special_ids(tokenizer),
        ),
        vision_config=dict(depth=32, embed_dim=1280, hidden_size=1536, mlp_ratio=4, num_heads=16, in_channels=3,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2),
        tie_word_embeddings=True,
        **ids,
    )


def _qwen2_vl_processor(tokenizer: PreTrainedTokenizerFast, config: Qwen2VLConfig, chat_template: str, splitting: bool) -> ProcessorMixin:
    """The released processor: any image side rounded to 28 pixels, between 3,136 and 12,845,056
    pixels; (h / 28) x (w / 28) tokens (256 for 448x448). `splitting` does not apply."""
    image_processor = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=28 * 28 * 16384, patch_size=14,
                                               merge_size=2, temporal_patch_size=2)
    return image_only(Qwen2VLProcessor)(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template)


# ---- LLaVA-OneVision: SigLIP so400m tower, 2-layer MLP projector, Qwen2 decoder -----------------

LLAVA_OV_PINPOINTS = [[384 * i, 384 * j] for i in range(1, 7) for j in range(1, 7)]


def _llava_onevision_05b(tokenizer: PreTrainedTokenizerFast) -> LlavaOnevisionConfig:
    return LlavaOnevisionConfig(
        vision_config=dict(model_type="siglip_vision_model", hidden_size=1152, intermediate_size=4304,
                           num_hidden_layers=26, num_attention_heads=16, image_size=384, patch_size=14,
                           vision_use_head=False),
        text_config=dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, vocab_size=152000, rms_norm_eps=1e-6,
                         rope_theta=1000000.0, max_position_embeddings=32768, tie_word_embeddings=True,
                         **_special_ids(tokenizer)),
        image_token_index=_id(tokenizer, "<image>"),
        video_token_index=_id(tokenizer, "<video>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        image_grid_pinpoints=LLAVA_OV_PINPOINTS,
        vision_aspect_ratio="anyres_max_9",
        tie_word_embeddings=True,
    )


def _llava_onevision_processor(tokenizer: PreTrainedTokenizerFast, config: LlavaOnevisionConfig, chat_template: str,
                               splitting: bool) -> ProcessorMixin:
    """The released processor: a 384x384 base view plus anyres crops (`splitting`; without it the
    grid has the one 384x384 pinpoint), 729 tokens per view."""
    pinpoints = LLAVA_OV_PINPOINTS if splitting else [[384, 384]]
    return image_only(LlavaOnevisionProcessor)(
        image_processor=LlavaOnevisionImageProcessorPil(size={"height": 384, "width": 384},
                                                        image_grid_pinpoints=pinpoints),
        tokenizer=tokenizer, num_image_tokens=729,
        vision_feature_select_strategy=config.vision_feature_select_strategy,
        vision_aspect_ratio=config.vision_aspect_ratio, chat_template=chat_template,
    )


REAL_MODELS: dict[str, RealSpec] = {
    "smolvlm-256m": RealSpec("idefics3", "HuggingFaceTB/SmolVLM-256M-Instruct", 49280,
                             _idefics3(SMOLVLM_256M_TEXT, SMOLVLM_256M_VISION, scale_factor=4),
                             _idefics3_processor, 256_000_000),
    "smolvlm-2.2b": RealSpec("idefics3", "HuggingFaceTB/SmolVLM-Instruct", 49155,
                             _idefics3(SMOLVLM_2B_TEXT, SMOLVLM_2B_VISION, scale_factor=3),
                             _idefics3_processor, 2_250_000_000),
    "qwen2-vl-2b": RealSpec("qwen2_vl", "Qwen/Qwen2-VL-2B-Instruct", 151936, _qwen2_vl_2b, _qwen2_vl_processor,
                            2_208_985_600),
    "llava-onevision-0.5b": RealSpec("llava_onevision", "llava-hf/llava-onevision-qwen2-0.5b-ov-hf", 152000,
                                     _llava_onevision_05b, _llava_onevision_processor, 894_000_000),
}


def real_spec(ref: ModelRef) -> RealSpec:
    """The spec of "real:<name>" (or of a reference named "<name>"); ConfigError naming the known ones."""
    key = ref.location if ref.kind == REAL else ref.name
    if key not in REAL_MODELS:
        raise ConfigError(f"unknown real-size model '{ref.name}'; known: {[ModelRef.real(k).name for k in REAL_MODELS]}")
    return REAL_MODELS[key]


def pad_vocabulary(tokenizer: PreTrainedTokenizerFast, size: int) -> PreTrainedTokenizerFast:
    """`tokenizer` with filler tokens appended to its BPE vocabulary up to `size` entries.

    No merge produces a filler, so encoding is unchanged; the fillers only give the vocabulary
    (and the model's embedding and LM head) their published size."""
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab: dict[str, int] = state["model"]["vocab"]
    if len(tokenizer) > size:
        raise ConfigError(f"real-size tokenizer: {len(tokenizer)} tokens already exceed the vocabulary size {size}")
    next_id = max(max(vocab.values()), *(t["id"] for t in state["added_tokens"])) + 1
    for i in range(size - len(tokenizer)):
        vocab[f"<filler_{i}>"] = next_id + i
    padded = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)),
        pad_token=tokenizer.pad_token, bos_token=tokenizer.bos_token, eos_token=tokenizer.eos_token,
        extra_special_tokens=tokenizer.extra_special_tokens,
    )
    if len(padded) != size:
        raise ConfigError(f"real-size tokenizer: padded to {len(padded)} tokens, not {size}")
    return padded


def real_tokenizer(spec: RealSpec, corpus: list[str] | None = None) -> PreTrainedTokenizerFast:
    """A byte-level BPE (at most 1024 tokens learnt from `corpus` and the built-in text) with the
    special tokens of the spec's family, padded to the published vocabulary size."""
    family = VLM_FAMILIES[spec.kind]
    tokenizer = train_tokenizer(corpus or [], vocab_size=1024, special_tokens=family.special_tokens,
                                named_tokens=family.named_tokens)
    return pad_vocabulary(tokenizer, spec.vocab_size)


def real_config(ref: ModelRef, corpus: list[str] | None = None) -> tuple[PreTrainedConfig, PreTrainedTokenizerFast]:
    """(model config, tokenizer) of "real:<name>", built without any weights."""
    spec = real_spec(ref)
    tokenizer = real_tokenizer(spec, corpus)
    return spec.make_config(tokenizer), tokenizer


def count_real_parameters(ref: ModelRef) -> int:
    """Parameters of "real:<name>", counted on the meta device (no memory, about a second)."""
    config, _ = real_config(ref)
    with torch.device("meta"):
        model = VLM_FAMILIES[real_spec(ref).kind].model_class(config)
    return sum(p.numel() for p in model.parameters())


def build_real_vlm(
    ref: ModelRef, *, seed: int = 0, corpus: list[str] | None = None, image_splitting: bool = True,
    device: str | torch.device = "cpu",
) -> tuple[PreTrainedModel, ProcessorMixin]:
    """Build "real:<name>" with random weights on `device` and its processor, offline.

    Args:
        ref: "real:<key>" (or a reference named by a key of `REAL_MODELS`).
        seed: seeds the weight initialisation (the global RNG is left untouched); the same seed
            gives the same weights, so a run rebuilds its base model instead of saving it.
        corpus: extra tokenizer training text.
        image_splitting: the released processors' crops (SmolVLM: 4 crops a side plus a global
            view; LLaVA-OneVision: anyres grid); False: one crop per image (64 tokens for
            SmolVLM-256M, 81 for SmolVLM-2.2B, 729 for LLaVA-OneVision). Qwen2-VL: no effect.
        device: where the weights are materialised.

    Returns:
        (model in float32 train mode, processor).
    """
    spec = real_spec(ref)
    family = VLM_FAMILIES[spec.kind]
    config, tokenizer = real_config(ref, corpus)
    processor = spec.make_processor(tokenizer, config, CHAT_TEMPLATE.replace("{{ IMAGE }}", family.image_text),
                                    image_splitting)
    devices = [torch.device(device)] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.device(device):
        torch.manual_seed(seed)
        model = family.model_class(config)
    for key in ("eos_token_id", "pad_token_id", "bos_token_id"):
        setattr(model.generation_config, key, getattr(tokenizer, key))
    return model.train(), processor
