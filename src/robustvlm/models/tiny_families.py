"""The architectures `build_tiny_vlm` can build: real transformers config, model and processor
classes at toy width, named by transformers' `model_type`.

Every family maps a square image of `image_size` pixels (64 by default) to 16 image tokens, and
uses a llama-like text decoder of the family's own kind (Qwen2 for Qwen2-VL, Gemma 3 for Gemma 3,
...). Processors of video-capable families are built without their video processor where
torchvision is missing (`image_only`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from transformers import (
    Gemma3Config,
    Gemma3ForConditionalGeneration,
    Gemma3ImageProcessorPil,
    Gemma3Processor,
    GotOcr2ImageProcessorPil,
    Idefics3Config,
    Idefics3ForConditionalGeneration,
    Idefics3ImageProcessorPil,
    Idefics3Processor,
    InternVLConfig,
    InternVLForConditionalGeneration,
    InternVLProcessor,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaImageProcessorPil,
    LlavaOnevisionConfig,
    LlavaOnevisionForConditionalGeneration,
    LlavaOnevisionImageProcessorPil,
    LlavaOnevisionProcessor,
    LlavaProcessor,
    PaliGemmaConfig,
    PaliGemmaForConditionalGeneration,
    PaliGemmaProcessor,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    ProcessorMixin,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessorPil,
    Qwen2VLProcessor,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
    Qwen3VLProcessor,
    SiglipImageProcessorPil,
)

from robustvlm.errors import ConfigError
from robustvlm.models.image_only import image_only

TOKENS_PER_SIDE = 4  # every family: 4 x 4 = 16 image tokens per image


@dataclass(frozen=True)
class Family:
    """How to build one tiny architecture.

    Attributes:
        image_text: what the chat template writes for an image (the processor expands it).
        make_config: (tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> model config.
        make_processor: (tokenizer, config, chat template) -> processor matching the config.
        model_class: the ...ForConditionalGeneration class.
        special_tokens: tokens beyond pad/bos/eos that the processor needs, unnamed.
        named_tokens: attribute name -> token, special tokens the processor finds on the
            tokenizer by name (e.g. `tokenizer.boi_token`).
        video_processor: the video processor class of a video-capable family (its settings are
            saved with the processor even when it is built without one: `image_only`).
    """

    image_text: str
    make_config: Callable[[PreTrainedTokenizerFast, dict[str, int]], PreTrainedConfig]
    make_processor: Callable[[PreTrainedTokenizerFast, Any, str], ProcessorMixin]
    model_class: type[PreTrainedModel]
    special_tokens: tuple[str, ...] = ()
    named_tokens: dict[str, str] = field(default_factory=dict)
    video_processor: str | None = None


def text_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int], model_type: str = "llama",
                **extra: Any) -> dict[str, Any]:
    """A decoder config of `model_type`: `hidden_size` wide, `num_layers` deep, 4 heads."""
    hidden = sizes["hidden_size"]
    return dict(
        model_type=model_type,
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
        **extra,
    )


def _vision_config(sizes: dict[str, int], patch_size: int, **extra: Any) -> dict[str, Any]:
    return dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                image_size=sizes["image_size"], patch_size=patch_size, **extra)


def _token_id(tokenizer: PreTrainedTokenizerFast, token: str) -> int:
    return cast(int, tokenizer.convert_tokens_to_ids(token))  # one token (a str): one id


def _vision(config: PreTrainedConfig) -> PreTrainedConfig:
    """A built config's vision sub-config (the config's constructor makes a dict a config)."""
    vision = config.vision_config
    assert isinstance(vision, PreTrainedConfig)
    return vision


# Keyword arguments the configs accept at run time (PreTrainedConfig's own keys, such as
# pad_token_id, and aliases in a config's attribute_map, such as LlavaConfig's image_token_id)
# that their typed signatures do not list go in a dict[str, Any] passed as **kwargs.


def _patch(sizes: dict[str, int], merge: int = 1) -> int:
    """The patch side giving TOKENS_PER_SIDE tokens per side after merging `merge` x `merge`."""
    side = sizes["image_size"]
    if side % (TOKENS_PER_SIDE * merge):
        raise ConfigError(f"tiny models: image_size {side} must be a multiple of {TOKENS_PER_SIDE * merge}")
    return side // (TOKENS_PER_SIDE * merge)


# ---- Idefics3 (SmolVLM) and LLaVA ------------------------------------------------------------


def _idefics3_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> Idefics3Config:
    untyped: dict[str, Any] = {"pad_token_id": tokenizer.pad_token_id}  # see above
    return Idefics3Config(
        text_config=text_config(tokenizer, sizes),
        vision_config=_vision_config(sizes, patch_size=8),
        scale_factor=2,
        image_token_id=_token_id(tokenizer, "<image>"),
        **untyped,
    )


def _idefics3_processor(tokenizer: PreTrainedTokenizerFast, config: Idefics3Config, chat_template: str) -> Idefics3Processor:
    vision = _vision(config)
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


def _llava_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> LlavaConfig:
    vision = dict(model_type="clip_vision_model", projection_dim=64, **_vision_config(sizes, 16))
    untyped: dict[str, Any] = {"image_token_id": _token_id(tokenizer, "<image>")}  # see above
    return LlavaConfig(
        vision_config=vision,
        text_config=text_config(tokenizer, sizes),
        **untyped,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )


def _llava_processor(tokenizer: PreTrainedTokenizerFast, config: LlavaConfig, chat_template: str) -> LlavaProcessor:
    side = _vision(config).image_size
    return LlavaProcessor(
        image_processor=LlavaImageProcessorPil(
            size={"shortest_edge": side}, crop_size={"height": side, "width": side}
        ),
        tokenizer=tokenizer,
        patch_size=_vision(config).patch_size,
        vision_feature_select_strategy=config.vision_feature_select_strategy,
        num_additional_image_tokens=1,  # the CLS token, dropped by the "default" strategy
        chat_template=chat_template,
    )


# ---- the Qwen-VL family: patches merged 2 x 2, multimodal rotary positions --------------------

QWEN_TOKENS = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
               "vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"}


def _qwen_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, Any]:
    """The special-token ids of a Qwen-VL config, as keyword arguments (see above)."""
    return {f"{name}_id": _token_id(tokenizer, token) for name, token in QWEN_TOKENS.items()}


def _mrope(sizes: dict[str, int], **extra: Any) -> dict[str, Any]:
    """Rotary settings splitting each head's frequencies over (time, height, width)."""
    half = sizes["hidden_size"] // 4 // 2  # 4 heads
    section = [half - 2 * (half * 3 // 8), half * 3 // 8, half * 3 // 8]
    return {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section, **extra}


def _qwen2_vl_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> Qwen2VLConfig:
    return Qwen2VLConfig(
        text_config=text_config(tokenizer, sizes, "qwen2_vl_text", rope_parameters=_mrope(sizes)),
        vision_config=dict(depth=2, embed_dim=64, hidden_size=sizes["hidden_size"], num_heads=4,
                           mlp_ratio=2, patch_size=_patch(sizes, 2), spatial_merge_size=2,
                           temporal_patch_size=2),
        **_qwen_ids(tokenizer),
    )


def _qwen2_5_vl_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> Qwen2_5_VLConfig:
    return Qwen2_5_VLConfig(
        text_config=text_config(tokenizer, sizes, "qwen2_5_vl_text", rope_parameters=_mrope(sizes)),
        vision_config=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4,
                           out_hidden_size=sizes["hidden_size"], patch_size=_patch(sizes, 2),
                           spatial_merge_size=2, temporal_patch_size=2, window_size=sizes["image_size"],
                           fullatt_block_indexes=[1]),
        **_qwen_ids(tokenizer),
    )


def _qwen3_vl_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> Qwen3VLConfig:
    patch = _patch(sizes, 2)
    return Qwen3VLConfig(
        text_config=text_config(tokenizer, sizes, "qwen3_vl_text", head_dim=sizes["hidden_size"] // 4,
                                rope_parameters=_mrope(sizes, mrope_interleaved=True)),
        vision_config=dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4,
                           out_hidden_size=sizes["hidden_size"], patch_size=patch, spatial_merge_size=2,
                           temporal_patch_size=2, num_position_embeddings=(sizes["image_size"] // patch) ** 2,
                           deepstack_visual_indexes=[0]),
        **_qwen_ids(tokenizer),
    )


def _qwen_processor(processor_class: type[ProcessorMixin]) -> Callable[..., ProcessorMixin]:
    def make(tokenizer: PreTrainedTokenizerFast, config: PreTrainedConfig, chat_template: str) -> ProcessorMixin:
        vision = config.vision_config
        pixels = _qwen_image_side(config) ** 2
        image_processor = Qwen2VLImageProcessorPil(
            min_pixels=pixels, max_pixels=pixels, patch_size=vision.patch_size,
            merge_size=vision.spatial_merge_size, temporal_patch_size=vision.temporal_patch_size,
        )
        # a class is hashable; mypy checks the instances' __hash__ against Hashable
        return image_only(processor_class)(  # type: ignore[arg-type]
            image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template
        )
    return make


def _qwen_image_side(config: PreTrainedConfig) -> int:
    """The square image side (pixels) a tiny Qwen-VL config was built for: 4 x 2 patches."""
    vision = config.vision_config
    return TOKENS_PER_SIDE * vision.spatial_merge_size * vision.patch_size


# ---- InternVL (-hf layout), LLaVA-OneVision, Gemma 3, PaliGemma ------------------------------


def _internvl_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> InternVLConfig:
    side, patch = sizes["image_size"], _patch(sizes, 2)
    return InternVLConfig(
        vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           image_size=[side, side], patch_size=[patch, patch]),
        text_config=text_config(tokenizer, sizes, "qwen2"),
        image_token_id=_token_id(tokenizer, "<IMG_CONTEXT>"),
        image_seq_length=TOKENS_PER_SIDE ** 2,
        downsample_ratio=0.5,
        vision_feature_layer=-1,
    )


def _internvl_processor(tokenizer: PreTrainedTokenizerFast, config: InternVLConfig, chat_template: str) -> ProcessorMixin:
    side = _vision(config).image_size[0]
    return image_only(InternVLProcessor)(
        image_processor=GotOcr2ImageProcessorPil(size={"height": side, "width": side}, crop_to_patches=False),
        tokenizer=tokenizer,
        image_seq_length=config.image_seq_length,
        chat_template=chat_template,
    )


def _siglip(sizes: dict[str, int], patch: int) -> dict[str, Any]:
    return dict(model_type="siglip_vision_model", **_vision_config(sizes, patch))


def _llava_onevision_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> LlavaOnevisionConfig:
    side = sizes["image_size"]
    return LlavaOnevisionConfig(
        vision_config=_siglip(sizes, _patch(sizes)),
        text_config=text_config(tokenizer, sizes, "qwen2"),
        image_token_index=_token_id(tokenizer, "<image>"),
        video_token_index=_token_id(tokenizer, "<video>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
        image_grid_pinpoints=[[side, side]],
        vision_aspect_ratio="anyres_max_1",
    )


def _llava_onevision_processor(tokenizer: PreTrainedTokenizerFast, config: LlavaOnevisionConfig, chat_template: str) -> ProcessorMixin:
    side = _vision(config).image_size
    assert config.image_grid_pinpoints is not None  # _llava_onevision_config sets it
    return image_only(LlavaOnevisionProcessor)(
        image_processor=LlavaOnevisionImageProcessorPil(
            size={"height": side, "width": side}, image_grid_pinpoints=config.image_grid_pinpoints,
        ),
        tokenizer=tokenizer,
        num_image_tokens=TOKENS_PER_SIDE ** 2,
        vision_feature_select_strategy=config.vision_feature_select_strategy,
        vision_aspect_ratio=config.vision_aspect_ratio,
        chat_template=chat_template,
    )


GEMMA3_TOKENS = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                 "image_token": "<image_soft_token>"}


def _gemma3_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> Gemma3Config:
    head = sizes["hidden_size"] // 4
    return Gemma3Config(
        text_config=text_config(tokenizer, sizes, "gemma3_text", head_dim=head, query_pre_attn_scalar=head,
                                sliding_window=64, layer_types=[("sliding_attention", "full_attention")[i % 2]
                                                                 for i in range(sizes["num_layers"])]),
        vision_config=_siglip(sizes, _patch(sizes, 2)),
        mm_tokens_per_image=TOKENS_PER_SIDE ** 2,
        boi_token_index=_token_id(tokenizer, GEMMA3_TOKENS["boi_token"]),
        eoi_token_index=_token_id(tokenizer, GEMMA3_TOKENS["eoi_token"]),
        image_token_index=_token_id(tokenizer, GEMMA3_TOKENS["image_token"]),
    )


def _gemma3_processor(tokenizer: PreTrainedTokenizerFast, config: Gemma3Config, chat_template: str) -> Gemma3Processor:
    side = _vision(config).image_size
    assert config.mm_tokens_per_image is not None  # _gemma3_config sets it
    return Gemma3Processor(
        image_processor=Gemma3ImageProcessorPil(size={"height": side, "width": side}, do_pan_and_scan=False),
        tokenizer=tokenizer,
        chat_template=chat_template,
        image_seq_length=config.mm_tokens_per_image,
    )


def _paligemma_config(tokenizer: PreTrainedTokenizerFast, sizes: dict[str, int]) -> PaliGemmaConfig:
    return PaliGemmaConfig(
        vision_config=_siglip(sizes, _patch(sizes)),
        text_config=text_config(tokenizer, sizes, "gemma", head_dim=sizes["hidden_size"] // 4),
        image_token_index=_token_id(tokenizer, "<image>"),
        projection_dim=sizes["hidden_size"],
    )


def _paligemma_processor(tokenizer: PreTrainedTokenizerFast, config: PaliGemmaConfig, chat_template: str) -> PaliGemmaProcessor:
    side = _vision(config).image_size
    # Any: PaliGemmaProcessor reads an image_seq_length the image processor class does not declare
    image_processor: Any = SiglipImageProcessorPil(size={"height": side, "width": side})
    image_processor.image_seq_length = TOKENS_PER_SIDE ** 2
    return PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template)


QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"

VLM_FAMILIES: dict[str, Family] = {
    "idefics3": Family(
        "<image>", _idefics3_config, _idefics3_processor, Idefics3ForConditionalGeneration,
        special_tokens=("<image>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>"),
    ),
    "llava": Family("<image>", _llava_config, _llava_processor, LlavaForConditionalGeneration,
                    special_tokens=("<image>",)),
    "llava_onevision": Family(
        "<image>", _llava_onevision_config, _llava_onevision_processor, LlavaOnevisionForConditionalGeneration,
        named_tokens={"image_token": "<image>", "video_token": "<video>"},
        video_processor="LlavaOnevisionVideoProcessor",
    ),
    "qwen2_vl": Family(QWEN_IMAGE, _qwen2_vl_config, _qwen_processor(Qwen2VLProcessor),
                       Qwen2VLForConditionalGeneration, named_tokens=QWEN_TOKENS,
                       video_processor="Qwen2VLVideoProcessor"),
    "qwen2_5_vl": Family(QWEN_IMAGE, _qwen2_5_vl_config, _qwen_processor(Qwen2_5_VLProcessor),
                         Qwen2_5_VLForConditionalGeneration, named_tokens=QWEN_TOKENS,
                         video_processor="Qwen2VLVideoProcessor"),
    "qwen3_vl": Family(QWEN_IMAGE, _qwen3_vl_config, _qwen_processor(Qwen3VLProcessor),
                       Qwen3VLForConditionalGeneration, named_tokens=QWEN_TOKENS,
                       video_processor="Qwen3VLVideoProcessor"),
    "internvl": Family(
        "<IMG_CONTEXT>", _internvl_config, _internvl_processor, InternVLForConditionalGeneration,
        named_tokens={"start_image_token": "<img>", "end_image_token": "</img>",
                      "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"},
        video_processor="InternVLVideoProcessor",
    ),
    "gemma3": Family(GEMMA3_TOKENS["boi_token"], _gemma3_config, _gemma3_processor,
                     Gemma3ForConditionalGeneration, named_tokens=GEMMA3_TOKENS),
    "paligemma": Family("<image>", _paligemma_config, _paligemma_processor, PaliGemmaForConditionalGeneration,
                        named_tokens={"image_token": "<image>"}),
}
