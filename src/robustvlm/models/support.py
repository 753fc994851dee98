"""What each VLM architecture can do in robustvlm: the one declaration the checks, the
conformance tests (tests/models/test_conformance.py) and README's support table come from.

Every architecture of `tiny_families.VLM_FAMILIES` is tested on every capability it is not declared
unable to do; a capability it lacks stops the command before any work starts
(`require_capability`), with the reason below.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from robustvlm.errors import ConfigError
from robustvlm.model_ref import FOLDER, REAL, TINY, ModelRef
from robustvlm.models.real import real_spec
from robustvlm.models.tiny_families import VLM_FAMILIES
from robustvlm.models.zoo_recipes import resolve_model_ref

#: capability -> the command that needs it
WORKFLOW_CAPABILITIES: dict[str, str] = {
    "train": "robustvlm train (ERM and Dynamic BIRM; LoRA and frozen vision tower; --resume)",
    "eval": "robustvlm eval (greedy generation)",
    "mc-loglik": "robustvlm mc eval --method loglik",
    "mc-generate": "robustvlm mc eval --method generate",
    "rm": "robustvlm rm train / rm eval",
    "embed": "robustvlm embed train",
    "icl": "robustvlm icl eval",
    "diagnose": "robustvlm diagnose",
}

#: architecture (transformers' model_type) -> the README name
ARCHITECTURES: dict[str, str] = {
    "idefics3": "Idefics3 (SmolVLM)",
    "llava": "LLaVA",
    "llava_onevision": "LLaVA-OneVision",
    "qwen2_vl": "Qwen2-VL",
    "qwen2_5_vl": "Qwen2.5-VL",
    "qwen3_vl": "Qwen3-VL",
    "internvl": "InternVL (-hf layout)",
    "gemma3": "Gemma 3",
    "paligemma": "PaliGemma",
}

_PALIGEMMA_TEXT = "PaliGemma's processor needs an image in every prompt, and {what} has prompts without one"
_PALIGEMMA_MULTI = ("PaliGemma's processor puts every image before the text, so images cannot be interleaved "
                    "with demonstrations")

#: architecture -> {capability: why it is not supported}
NOT_SUPPORTED: dict[str, dict[str, str]] = {
    "paligemma": {
        "rm": _PALIGEMMA_TEXT.format(what="the text-only shortcut proxy and view"),
        "embed": _PALIGEMMA_TEXT.format(what="embedding training (its targets are text)"),
        "icl": _PALIGEMMA_MULTI,
        "diagnose": _PALIGEMMA_MULTI + " (diagnose runs in-context evaluation)",
    },
}


def supports(architecture: str, capability: str) -> bool:
    """True unless `architecture` is declared unable to do `capability`."""
    if capability not in WORKFLOW_CAPABILITIES:
        raise ConfigError(f"unknown capability '{capability}'; known: {list(WORKFLOW_CAPABILITIES)}")
    return capability not in NOT_SUPPORTED.get(architecture, {})


def model_type_of(ref: ModelRef) -> str | None:
    """The architecture of a model: the kind of "tiny:<kind>", the architecture of
    "real:<name>", or the `model_type` in a local folder's config.json; None for other names (hub
    names are checked when loaded). A folder reference (`model_ref.names_a_folder`) to nothing is
    a ConfigError saying so."""
    if ref.kind == REAL:
        return real_spec(ref).kind
    ref = resolve_model_ref(ref)
    name = ref.name
    if ref.kind == TINY:
        kind = ref.location
        if kind not in VLM_FAMILIES:
            raise ConfigError(f"unknown tiny architecture '{kind}' in '{name}'; known: {sorted(VLM_FAMILIES)}")
        return kind
    if ref.kind == FOLDER and not os.path.isdir(os.path.expanduser(name)):
        what = "is not a folder" if os.path.exists(os.path.expanduser(name)) else "does not exist"
        raise ConfigError(f"model '{name}': the local folder {what} (a hub model is named org/name)")
    config = Path(name) / "config.json"
    if not config.is_file():
        return None
    try:
        return str(json.loads(config.read_text(encoding="utf-8")).get("model_type"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{config}: cannot read the model's config: {exc}") from exc


def require_capability(ref: ModelRef, capability: str) -> None:
    """Raise ConfigError naming the architecture and the capability when model `ref` cannot
    do `capability` (or names an unknown tiny architecture)."""
    architecture = model_type_of(ref)
    if architecture is not None and not supports(architecture, capability):
        reason = NOT_SUPPORTED[architecture][capability]
        raise ConfigError(f"model '{ref.name}' ({ARCHITECTURES.get(architecture, architecture)}) cannot run "
                          f"{WORKFLOW_CAPABILITIES[capability]}: {reason}")
