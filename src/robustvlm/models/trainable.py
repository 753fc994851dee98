"""Choose which parts of a VLM train: paper setup (frozen vision encoder), full, or LoRA."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.tuners_utils import BaseTunerLayer
from torch import nn

from robustvlm.errors import ConfigError

# Attribute names of the parts in transformers 5.x image-text-to-text models:
# (the architectures of `models.support`, each checked by tests/models/test_conformance.py)
# Idefics3/SmolVLM: vision_model, connector, text_model;
# LLaVA/LLaVA-OneVision/Gemma3/PaliGemma/InternVL: vision_tower, multi_modal_projector, language_model
#   (LLaVA-OneVision's image_newline sits on the wrapper and trains with the projector);
# Qwen2-VL/Qwen2.5-VL/Qwen3-VL: visual (its `merger` is the projector), language_model.
VISION_NAMES = ("vision_model", "vision_tower", "visual")
PROJECTOR_NAMES = ("connector", "multi_modal_projector", "merger")
# Qwen3-VL: projectors of intermediate vision layers into early decoder layers (DeepStack)
EXTRA_PROJECTOR_NAMES = ("deepstack_merger_list",)
DECODER_NAMES = ("text_model", "language_model")
DECODER_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
MODES = ("paper", "full", "lora")
LORA_DEFAULTS: dict[str, Any] = {
    "r": 16,
    "alpha": 32,
    "dropout": 0.05,
    "target_modules": DECODER_PROJECTIONS,
    "modules_to_save": None,
}


@dataclass
class VLMParts:
    """The parts of a VLM and their dotted paths inside it (paths feed LoRA patterns).

    `extra_projectors`: modules inside the vision encoder that, like the projector, map vision
    features into the decoder (Qwen3-VL's DeepStack mergers); they train with the projector."""

    vision: nn.Module
    projector: nn.Module
    decoder: nn.Module
    lm_head: nn.Module
    decoder_path: str
    extra_projectors: tuple[nn.Module, ...] = ()


def unwrap_peft(model: nn.Module) -> nn.Module:
    """The transformers model inside a PEFT wrapper (the model itself otherwise)."""
    return model.get_base_model() if isinstance(model, PeftModel) else model


def find_parts(model: nn.Module) -> VLMParts:
    """Locate vision encoder, projector, text decoder and LM head by attribute name.

    Raises ConfigError naming the attributes looked for when a part is missing.
    """
    model = unwrap_peft(model)
    hf: Any = model  # a transformers model: get_output_embeddings (not declared by nn.Module)
    backbone = getattr(model, "model", None)
    roots: list[tuple[str, nn.Module]] = [("model", backbone)] if isinstance(backbone, nn.Module) else []
    roots.append(("", model))
    vision = _find(roots, VISION_NAMES)
    decoder = _find(roots, DECODER_NAMES)
    projector = _find(roots + ([vision] if vision else []), PROJECTOR_NAMES)
    lm_head = hf.get_output_embeddings()
    missing = [
        f"{what} (one of {names})"
        for what, names, found in (
            ("vision encoder", VISION_NAMES, vision),
            ("projector", PROJECTOR_NAMES, projector),
            ("text decoder", DECODER_NAMES, decoder),
            ("LM head", ("lm_head",), lm_head),
        )
        if found is None
    ]
    if missing:
        raise ConfigError(f"{type(model).__name__}: cannot locate {', '.join(missing)}")
    assert vision is not None and projector is not None and decoder is not None  # none is missing
    extras = tuple(m for name in EXTRA_PROJECTOR_NAMES if isinstance(m := getattr(vision[1], name, None), nn.Module))
    return VLMParts(vision[1], projector[1], decoder[1], lm_head, decoder_path=decoder[0], extra_projectors=extras)


def _find(roots: list[tuple[str, nn.Module]], names: tuple[str, ...]) -> tuple[str, nn.Module] | None:
    for path, root in roots:
        for name in names:
            module = getattr(root, name, None)
            if isinstance(module, nn.Module):
                return (f"{path}.{name}" if path else name), module
    return None


def configure_trainable(model: nn.Module, *, mode: str = "paper", lora: dict | None = None) -> nn.Module:
    """Set `requires_grad` for a training mode and return the model to train.

    Modes:
        paper: vision encoder frozen; projector, text decoder and LM head trained (and any module
            outside the vision encoder). The Dynamic BIRM paper's setup.
        full: every parameter trained.
        lora: PEFT LoRA adapters on the text decoder, everything else frozen. `lora` keys (read
            in this mode only; None keeps a default): r (16), alpha (32), dropout (0.05),
            target_modules (a list of module names inside the text decoder, default its
            attention and MLP projections; or a regex string over full module paths, PEFT
            semantics), modules_to_save (None; e.g. ["connector"]).

    Returns the model itself for paper/full, a `PeftModel` wrapping it for lora.
    """
    if mode not in MODES:
        raise ConfigError(f"unknown trainable mode '{mode}'; known: {list(MODES)}")
    if isinstance(model, PeftModel):
        raise ConfigError("configure_trainable expects a model without PEFT adapters")
    if mode == "lora":
        return _apply_lora(model, _lora_options(lora or {}))
    model.requires_grad_(True)
    if mode == "paper":
        parts = find_parts(model)
        parts.vision.requires_grad_(False)
        for projector in (parts.projector, *parts.extra_projectors):
            projector.requires_grad_(True)  # Qwen-VL keeps its projectors inside `visual`
    return model


def _lora_options(options: dict) -> dict[str, Any]:
    """The defaults updated by `options` (a None value keeps the default)."""
    unknown = set(options) - set(LORA_DEFAULTS)
    if unknown:
        raise ConfigError(f"unknown lora option(s) {sorted(unknown)}; known: {sorted(LORA_DEFAULTS)}")
    return {**LORA_DEFAULTS, **{k: v for k, v in options.items() if v is not None}}


def _apply_lora(model: nn.Module, options: dict[str, Any]) -> PeftModel:
    targets = options["target_modules"]
    if not isinstance(targets, str):
        decoder_path = find_parts(model).decoder_path
        names = "|".join(re.escape(name) for name in targets)
        targets = rf"{re.escape(decoder_path)}\..*\.({names})"
    config = LoraConfig(
        r=options["r"],
        lora_alpha=options["alpha"],
        lora_dropout=options["dropout"],
        target_modules=targets,
        modules_to_save=options["modules_to_save"],
    )
    try:
        return get_peft_model(model, config)
    except ValueError as exc:
        raise ConfigError(f"LoRA could not be applied to {type(model).__name__}: {exc}") from exc


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts; tied parameters are counted once."""
    params = list(model.parameters())  # nn.Module.parameters() yields a shared tensor once
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """Recompute activations during the backward pass instead of keeping them (less memory,
    about one more forward pass of time; losses and gradients are unchanged).

    The non-reentrant variant is used: it works with frozen inputs (a frozen vision encoder,
    LoRA) without making the inputs require gradients. Takes effect in train mode.
    """
    inner: Any = unwrap_peft(model)  # a transformers model: its checkpointing methods
    if not getattr(inner, "supports_gradient_checkpointing", False):
        raise ConfigError(f"{type(inner).__name__} does not support gradient checkpointing")
    options = {"use_reentrant": False}
    if hasattr(inner, "activation_checkpointing_enable"):  # the name since transformers 5.x
        inner.activation_checkpointing_enable(activation_checkpointing_kwargs=options)
    else:
        inner.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)


def add_adapter_copy(model: PeftModel, name: str, source: str = "default") -> None:
    """Add a LoRA adapter `name` to `model` with `source`'s config and its current weights (the
    same initialisation), trainable like `source`."""
    if name in model.peft_config:
        raise ConfigError(f"the model already has an adapter named {name!r}")
    model.add_adapter(name, model.peft_config[source])
    params = dict(model.named_parameters())
    for key, param in params.items():
        if f".{name}." in key:
            twin = params[key.replace(f".{name}.", f".{source}.")]
            param.data.copy_(twin.data)
            param.requires_grad_(twin.requires_grad)


@contextmanager
def use_adapter(model: nn.Module, name: str | None) -> Iterator[None]:
    """Within the block, the LoRA layers of `model` compute with adapter `name` only (None: leave
    them as they are). Unlike PEFT's `set_adapter`, no parameter's `requires_grad` changes, so
    several adapters train side by side; the previous adapters are restored on exit. A backward
    pass that recomputes activations (gradient checkpointing) must run inside the same block."""
    layers = [] if name is None else [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    saved = [layer._active_adapter for layer in layers]
    for layer in layers:
        assert name is not None  # layers is empty when name is None
        layer._active_adapter = [name]
    try:
        yield
    finally:
        for layer, before in zip(layers, saved):
            layer._active_adapter = before


def save_merged(
    model: nn.Module,
    processor: Any,
    path: str | Path,
    *,
    state_dict: dict[str, Any] | None = None,
    adapter_names: list[str] | None = None,
) -> nn.Module:
    """Save a plain transformers model (LoRA adapters merged: all, or `adapter_names`) with its
    processor into `path`; returns the saved (merged) model.

    `state_dict` (gathered weights of a sharded run) replaces the model's own where given; a
    LoRA model is merged from its own (unsharded) weights.
    """
    hf: Any = model  # a transformers model or a PeftModel: merge_and_unload, save_pretrained
    if hasattr(hf, "merge_and_unload"):
        hf, state_dict = hf.merge_and_unload(adapter_names=adapter_names), None
    hf.save_pretrained(path, state_dict=state_dict)
    processor.save_pretrained(path)
    return hf
