"""Model backends: load a model by name as a family and use the operations its family supports.

In the style of lmms-eval's model registry: `BACKENDS` maps a family to a `BackendSpec`, its
`Backend` class and the capabilities it declares (from `CAPABILITIES`). The interface is
`backends/base.py`; each family's class lives in its own module (`vlm`, `dual_encoder`, `reward`,
`embedding`, `served`) and the registry names it by path, so it is imported only when a model of
that family loads (a plugin's family likewise: `robustvlm.plugins`). `load_backend` infers
the family from the name when not given (`infer_family`), loads the model in eval mode with its
processor and returns the family's Backend. Adding a family = one registry entry + its class in
its own module (which says how to load the model, and overrides an operation only where the
family computes it differently).

| family   | models                                               | capabilities                            |
|----------|------------------------------------------------------|-----------------------------------------|
| `vlm`    | image-text-to-text (Idefics3, LLaVA, Qwen2-VL, ...)  | generate, option_loglik, image_embed    |
| `clip`   | CLIP dual encoders                                   | image_embed, text_embed                 |
| `siglip` | SigLIP dual encoders                                 | image_embed, text_embed                 |
| `reward` | reward models (a VLM + scalar head, `models.reward`) | reward |
| `vlm2vec-vqa`, `vlm2vec-caption`, `vlm2vec-mixed` | a VLM as an embedding model (VLM2Vec), trained on VQA pairs, caption pairs or both | image_embed, text_embed |
| `openai` | a model behind an OpenAI-compatible server, "openai:MODEL" (`models.served`) | generate, option_loglik (where the server returns prompt log-probabilities) |

A folder holding a family's marker file (a reward model's `reward_model.json`) is that
family; a folder written by `robustvlm embed train` names its family in its `embedding.json`.
A served model ("openai:MODEL") needs the server's settings (`ServedConfig`: --base-url, ...).
The operations (`Backend.generate`, `generate_chats`, `option_logliks`, `embed_images`, `embed_queries`,
`embed_texts`, `rewards`) call the model operations of `models.generate`, `models.loglik`,
`models.vision`, `models.text_encoder`, `models.embedding` and `models.reward`; asking a backend
for one its family does not declare is a ConfigError naming the model, its family and what it
supports.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import AutoConfig

from robustvlm.config import ServedConfig
from robustvlm.errors import ConfigError
from robustvlm.model_ref import REAL, SERVED, TINY, ModelRef
from robustvlm.models.backends.base import CAPABILITIES, Backend
from robustvlm.models.embedding import EMBEDDING_FAMILIES, EmbeddingSpec
from robustvlm.models.hub import hub_error_line
from robustvlm.models.loading import LOAD_ERRORS
from robustvlm.models.real import real_spec
from robustvlm.models.reward import META_FILE
from robustvlm.models.served import SERVED_PREFIX
from robustvlm.models.tiny_clip import DUAL_ENCODER_KINDS
from robustvlm.models.tiny_families import VLM_FAMILIES as TINY_VLMS
from robustvlm.models.zoo_recipes import resolve_model_ref
from robustvlm.plugins import load_plugins
from robustvlm.redact import refuse_key_like
from robustvlm.sharding import place_model

__all__ = ["BACKENDS", "CAPABILITIES", "Backend", "BackendSpec", "infer_family", "load_backend"]

DEFAULT_FAMILY = "vlm"  # the family of a model whose type no other family claims
#: The Backend classes robustvlm ships, by name: each in its family's module, imported when used.
BACKEND_CLASSES = {
    "VLMBackend": "robustvlm.models.backends.vlm:VLMBackend",
    "DualEncoderBackend": "robustvlm.models.backends.dual_encoder:DualEncoderBackend",
    "RewardBackend": "robustvlm.models.backends.reward:RewardBackend",
    "EmbeddingBackend": "robustvlm.models.backends.embedding:EmbeddingBackend",
    "ServedBackend": "robustvlm.models.backends.served:ServedBackend",
}


def import_backend(path: str) -> type[Backend]:
    """The Backend class at "package.module:Class" (imported now)."""
    module, _, attribute = path.partition(":")
    backend = getattr(importlib.import_module(module), attribute)
    if not (isinstance(backend, type) and issubclass(backend, Backend)):
        raise ConfigError(f"backend {path!r} is not a Backend class")
    return backend


def __getattr__(name: str) -> type[Backend]:
    """`models.backends.VLMBackend` and the other shipped classes, imported on first use."""
    if name in BACKEND_CLASSES:
        return import_backend(BACKEND_CLASSES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class BackendSpec:
    """A family of the registry.

    Attributes:
        backend: its Backend class (loading and the operations it implements), or where to
            import it from, "package.module:Class" (imported when a model of the family loads).
        capabilities: the operations it supports, from CAPABILITIES.
        model_types: prefixes of the HF config `model_type` (and of the "tiny:" kind) that
            make a model this family; none for the default family.
        marker: a file whose presence in a model folder makes the folder this family.
    """

    backend: type[Backend] | str
    capabilities: frozenset[str]
    model_types: tuple[str, ...] = ()
    marker: str | None = None

    def backend_class(self) -> type[Backend]:
        """Its Backend class, imported now if the spec names it by path."""
        return self.backend if isinstance(self.backend, type) else import_backend(self.backend)


BACKENDS: dict[str, BackendSpec] = {
    "vlm": BackendSpec(BACKEND_CLASSES["VLMBackend"], frozenset({"generate", "option_loglik", "image_embed"})),
    "clip": BackendSpec(BACKEND_CLASSES["DualEncoderBackend"], frozenset({"image_embed", "text_embed"}), ("clip",)),
    "siglip": BackendSpec(BACKEND_CLASSES["DualEncoderBackend"], frozenset({"image_embed", "text_embed"}), ("siglip",)),
    "reward": BackendSpec(BACKEND_CLASSES["RewardBackend"], frozenset({"reward"}), marker=META_FILE),
    **{
        family: BackendSpec(BACKEND_CLASSES["EmbeddingBackend"], frozenset({"image_embed", "text_embed"}))
        for family in EMBEDDING_FAMILIES.values()
    },
    "openai": BackendSpec(BACKEND_CLASSES["ServedBackend"], frozenset({"generate", "option_loglik"})),
}
SERVED_FAMILY = "openai"


def infer_family(ref: ModelRef, *, trust_remote_code: bool = False) -> str:
    """The family of a model: the one whose marker file its folder holds (a reward model), or
    the one its folder's `embedding.json` names (a model from `robustvlm embed train`), else the
    one whose `model_types` prefixes its config's `model_type` (for "tiny:<kind>", the kind:
    "tiny:clip" is a CLIP; an unknown kind is a ConfigError; for "real:<name>", its architecture),
    else DEFAULT_FAMILY; "openai:MODEL"
    is a served model."""
    if ref.kind == SERVED:
        return SERVED_FAMILY
    ref = resolve_model_ref(ref)
    family = _folder_family(ref)
    if family is not None:
        return family
    model_type = _model_type(ref, trust_remote_code)
    for family, spec in BACKENDS.items():
        if any(model_type.startswith(prefix) for prefix in spec.model_types):
            return family
    return DEFAULT_FAMILY


def _folder_family(ref: ModelRef) -> str | None:
    """The family a model folder declares: by a backend's marker file, else by its
    `embedding.json`; None for a folder that declares none (or a name that is not a folder)."""
    for family, spec in BACKENDS.items():
        if spec.marker and (Path(ref.name) / spec.marker).is_file():
            return family
    embedding = EmbeddingSpec.read(ref.name) if Path(ref.name).is_dir() else None
    return embedding.family if embedding is not None else None


def _model_type(ref: ModelRef, trust_remote_code: bool) -> str:
    """The `model_type` of a model: the kind of "tiny:<kind>" (ConfigError for an unknown one),
    the architecture of "real:<name>", else its HF config's (ConfigError when it cannot be read)."""
    if ref.kind == TINY:
        model_type = ref.location
        if model_type not in (*TINY_VLMS, *DUAL_ENCODER_KINDS):
            raise ConfigError(f"unknown tiny model '{ref.name}'; known: "
                              f"{[ModelRef.tiny(k).name for k in (*sorted(TINY_VLMS), *DUAL_ENCODER_KINDS)]}")
        return model_type
    if ref.kind == REAL:
        return real_spec(ref).kind
    kwargs = {"trust_remote_code": True} if trust_remote_code else {}
    try:
        return str(AutoConfig.from_pretrained(ref.location, **kwargs).model_type)
    except LOAD_ERRORS as exc:
        raise ConfigError(f"cannot read the config of model '{ref.name}' to infer its family: "
                          f"{hub_error_line(ref.name, exc)}") from exc


def generative_family(ref: ModelRef) -> str:
    """The family of a model that generates: a served one for "openai:MODEL", else DEFAULT_FAMILY
    (no config is read)."""
    return SERVED_FAMILY if ref.kind == SERVED else DEFAULT_FAMILY


SERVER_MAY_DIFFER = "server.base_url"


def served_settings(models: ModelRef | Sequence[ModelRef], served: ServedConfig | None) -> dict[str, Any]:
    """What a run folder records of the server: {"server": {"base_url": ...}} when one of `models`
    is a served model, else {} (no key, no request policy). The model name is what identifies a
    served model: a resumed run may reach it at another address (SERVER_MAY_DIFFER).

    Raises ConfigError, before any folder is claimed, for a served model without a server and for
    a server given to no served model."""
    refs = [models] if isinstance(models, ModelRef) else list(models)
    is_served = [r for r in refs if r.kind == SERVED]
    for ref in is_served:  # the id goes into every request: never a pasted key
        refuse_key_like(ref.location, "served model name", "the model id the server lists")
    if is_served and served is None:
        raise ConfigError(f"model '{is_served[0].name}' is served: give its server's address (--base-url URL)")
    if served is not None and not is_served:
        raise ConfigError(f"--base-url is for a served model ({SERVED_PREFIX}MODEL); no --model names one")
    return {"server": {"base_url": served.base_url}} if served is not None else {}


def load_backend(
    ref: ModelRef, family: str | None = None, *, corpus: list[str] | None = None, trust_remote_code: bool = False,
    served: ServedConfig | None = None,
) -> Backend:
    """Load a model and its processor as a Backend.

    Args:
        ref: hub name, local folder, or "tiny:<kind>" (built offline: a VLM architecture of
            `models.support`, e.g. "tiny:qwen2_vl", or "tiny:clip" / "tiny:siglip"), "zoo:NAME"
            (a built member of the model zoo, `models.zoo_recipes`) or "real:<name>" (a released
            architecture at real size, random weights; `models.real`).
        family: a key of BACKENDS; None infers it (`infer_family`).
        corpus: tokenizer training text for "tiny:" models (ignored for others).
        trust_remote_code: passed to transformers only when True.
        served: the server of a served model ("openai:MODEL"); needed for one, unused by others.

    Under a launcher (torchrun, accelerate launch) the model goes on this process's device
    (`sharding.place_model`: cuda:LOCAL_RANK where CUDA is); otherwise it stays on the CPU.

    Raises ConfigError for an unknown family or a model that cannot be loaded.
    """
    ref = resolve_model_ref(ref)
    family = family or infer_family(ref, trust_remote_code=trust_remote_code)
    if family not in BACKENDS:
        load_plugins()
    if family not in BACKENDS:
        raise ConfigError(f"model '{ref.name}': family must be one of {list(BACKENDS)}, got '{family}'")
    if family == SERVED_FAMILY and served is not None:
        from robustvlm.models.backends.served import ServedBackend

        return ServedBackend.connect(ref, family, served)
    backend = BACKENDS[family].backend_class().load(ref, family, corpus=corpus, trust_remote_code=trust_remote_code)
    backend.model = place_model(backend.model)  # under a launcher: this process's GPU (sharding)
    return backend
