"""A model reference, parsed once from any of its six spellings.

    hub id        org/name                    a model on the Hugging Face hub
    folder        ./runs/x/final, /abs/path   a folder written by `save_pretrained` (or `train`)
    tiny:KIND     tiny:idefics3, tiny:clip    built offline with random weights (`models.tiny_families`)
    zoo:NAME      zoo:idefics3-siglip-m       a built member of the model zoo (`models.zoo_recipes`)
    real:NAME     real:smolvlm-256m           a released architecture at its real size, random weights
    openai:MODEL  openai:gpt-4o               a model behind an OpenAI-compatible server (`--base-url`)

`ModelRef.parse` is the only place that reads a spelling (tests/test_model_ref.py greps the
sources for prefix checks elsewhere); it is called where an option or a config is read (cli/,
config/), and `ModelRef.from_record` where a saved file names a model; code below takes and
returns the value and asks it (`kind`, `location`, `capabilities`) instead. Plain text in, plain values out: whether a zoo member is
built or a tiny kind exists is checked where the model is resolved or loaded (`models/`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

HUB, FOLDER, TINY, ZOO, REAL, SERVED = "hub", "folder", "tiny", "zoo", "real", "openai"
PREFIXES = {TINY: "tiny:", ZOO: "zoo:", REAL: "real:", SERVED: "openai:"}
"""The spellings that carry a prefix, by kind."""

WEIGHTS = "weights"
"""Capability: its parameters are here to train, probe or score by log-likelihood (not a served model)."""
BUILT_OFFLINE = "built_offline"
"""Capability: built by robustvlm without any download (random weights: tiny and real-size models)."""


@dataclass(frozen=True)
class ModelRef:
    """A parsed model name.

    Attributes:
        name: as written (what configs, results and messages show).
        kind: one of HUB, FOLDER, TINY, ZOO, REAL, SERVED.
        location: what the kind reads: the tiny kind, the zoo member, the real-size model, the
            served model's id (each without its prefix), the hub id or the folder path.
    """

    name: str
    kind: str
    location: str

    @classmethod
    def parse(cls, name: str) -> ModelRef:
        """The reference `name` spells (a name with no prefix: a folder when it reads as a local
        path, `names_a_folder`, else a hub id)."""
        for kind, prefix in PREFIXES.items():
            if name.startswith(prefix):
                return cls(name, kind, name[len(prefix):])
        return cls(name, FOLDER if names_a_folder(name) else HUB, name)

    @classmethod
    def of(cls, kind: str, location: str) -> ModelRef:
        """The reference of kind `kind` (a prefixed one) at `location`: `ModelRef.of(ZOO, "m").name == "zoo:m"`."""
        return cls(PREFIXES[kind] + location, kind, location)

    @classmethod
    def tiny(cls, family: str) -> ModelRef:
        """The tiny model of architecture `family`: `ModelRef.tiny("clip").name == "tiny:clip"`."""
        return cls.of(TINY, family)

    @classmethod
    def zoo(cls, member: str) -> ModelRef:
        """The zoo member `member`: `ModelRef.zoo("m").name == "zoo:m"`."""
        return cls.of(ZOO, member)

    @classmethod
    def real(cls, model: str) -> ModelRef:
        """The real-size model `model`: `ModelRef.real("smolvlm-256m").name == "real:smolvlm-256m"`."""
        return cls.of(REAL, model)

    @classmethod
    def folder(cls, path: str | os.PathLike[str]) -> ModelRef:
        """The model saved in folder `path` (written by `save_pretrained`, `train` or `zoo build`)."""
        return cls(str(path), FOLDER, str(path))

    @classmethod
    def from_record(cls, text: str) -> ModelRef:
        """The reference a file written earlier names (a results.json's or run.json's `model`):
        saved as its `name`, read back as `parse` reads an option."""
        return cls.parse(text)

    @property
    def family(self) -> str | None:
        """The architecture where the spelling says it (a tiny model's kind), else None: read
        from its config (`models.support.model_type_of`) or its recipe when it is loaded."""
        return self.location if self.kind == TINY else None

    @property
    def capabilities(self) -> frozenset[str]:
        """What the spelling promises (WEIGHTS, BUILT_OFFLINE)."""
        return frozenset({*(() if self.kind == SERVED else (WEIGHTS,)),
                          *((BUILT_OFFLINE,) if self.kind in (TINY, REAL) else ())})


def names_a_folder(name: str) -> bool:
    """Whether an unprefixed model name is a local path rather than a hub id (`org/name`): it
    starts with `.`, `/` or `~`, holds a separator beyond one `org/name` slash (or the OS's own),
    or its parent folder exists (`runs/final` beside a `runs/` folder)."""
    seps = name.count("/") + (name.count(os.sep) if os.sep != "/" else 0)
    parent = os.path.dirname(name)
    return name.startswith((".", "/", "~")) or seps > 1 or (bool(parent) and os.path.isdir(parent))
