"""The model zoo's recipes, their keys, and `zoo:NAME` model names.

A zoo member is a small model pretrained offline on real images (`workflows.zoo` builds it) and
saved with `save_pretrained` under `$ROBUSTVLM_CACHE/zoo/<name>-<key>`, where `<key>` is the
first 12 hex digits of the sha256 of the recipe's canonical JSON (with RECIPE_VERSION): a changed
recipe lands in a new folder (a rebuild), an unchanged one finds its folder (no rebuild).
`resolve_model_ref(ModelRef.zoo(NAME))` is that folder, so every command that names a model accepts a
member by name once it is built.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from robustvlm.errors import ConfigError
from robustvlm.model_ref import ZOO, ModelRef
from robustvlm.models.hub import checked_hub_name
from robustvlm.models.response_cache import cache_dir

#: Bumped when the build code changes what a recipe produces, so old members are not reused.
RECIPE_VERSION = 3
DUAL_ENCODERS = ("clip", "siglip")
VLMS = ("idefics3", "llava")


class Recipe(BaseModel):
    """How one member is made. Widths and depths are of the text side (VLM decoder or dual-encoder
    text tower) and of the vision tower; steps are optimiser steps; lr the AdamW peak rate.

    A dual encoder (`arch` clip/siglip) trains `steps` contrastive steps on image/caption pairs.
    A VLM (`arch` idefics3/llava) takes its vision tower from `tower` ("scratch", or "zoo:NAME", a
    dual encoder whose vision tower it copies), aligns connector and decoder on captions for
    `align_steps` with the tower frozen, then instruction-tunes connector and decoder (and the tower when
    `tune_tower`) for `steps`. With `init` ("zoo:NAME", a VLM of the same architecture) it starts
    from that member's weights instead; `defined_label_share` is the share of tuning samples that
    are defined-label sequences (`workflows.zoo.data.defined_label_sample`).

    The in-context curriculum (`workflows.zoo.recall`): a VLM with `recall_steps` first trains its
    decoder on text-only associative recall, then with `episode_steps` on defined-label picture
    episodes (several labelled queries each), before its `tune` stage. `augment`: every training
    picture passes through `data.augment` (varied pretraining).

    Language model first (Zoo III, `workflows.zoo.chat_recall`): the decoder's fresh weights are
    the recall probe's (`decoder_init` "probe"), and its recall stage may stop before the end of
    its rate schedule (`recall_schedule`); after `recall_steps`, the decoder
    trains `chat_recall_steps` on recall in the chat layout (the key-value gap growing to a
    question and the turn markers), then `named_steps` on named defined-label episodes in text
    mixed with the instruction questions in text; then the projector alone (`project_steps`,
    decoder and tower frozen) on the instruction mix, then `tune` on a mix whose `episode_share`
    is defined-label picture episodes, the decoder at `lm_lr`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arch: Literal["clip", "siglip", "idefics3", "llava"]
    width: int = Field(default=64, ge=16)
    depth: int = Field(default=2, ge=1)
    vision_width: int = Field(default=64, ge=16)
    vision_depth: int = Field(default=2, ge=1)
    image_size: int = Field(default=32, ge=16)
    patch_size: int = Field(default=4, ge=2, description="vision patch side; a zoo tower brings its own")
    data: Literal["fashion-mnist-train"] = "fashion-mnist-train"
    n_images: int | None = Field(default=None, ge=10, description="training images used (None: all 60,000)")
    tower: str = "scratch"
    tune_tower: bool = True
    align_steps: int = Field(default=0, ge=0)
    steps: int = Field(default=100, ge=1)
    batch_size: int = Field(default=16, ge=2)
    lr: float = Field(default=1e-3, gt=0)
    seed: int = 0
    eval_images: int = Field(default=1000, ge=10, description="held-out test images scored for the card")
    init: str | None = Field(default=None, description="zoo:NAME: start from that VLM member's weights")
    defined_label_share: float = Field(default=0.0, ge=0.0, le=1.0,
                                       description="share of tuning samples whose labels the demonstrations define")
    recall_steps: int = Field(default=0, ge=0, description="text-only associative-recall steps (curriculum)")
    episode_steps: int = Field(default=0, ge=0, description="defined-label picture-episode steps (curriculum)")
    augment: bool = Field(default=False, description="training pictures drawn through data.augment")
    chat_recall_steps: int = Field(default=0, ge=0, description="associative recall in the chat layout (LM first)")
    named_steps: int = Field(default=0, ge=0, description="named defined-label episodes in text (LM first)")
    project_steps: int = Field(default=0, ge=0, description="projector alone, decoder and tower frozen (LM first)")
    episode_share: float = Field(default=0.0, ge=0.0, le=1.0,
                                 description="share of each tuning batch that is defined-label picture episodes")
    lm_lr: float | None = Field(default=None, gt=0, description="the decoder's peak rate in `tune` (None: lr)")
    decoder_init: Literal["member", "probe"] = Field(
        default="member", description="probe: the fresh decoder's weights are those of `zoo probe-recall "
                                      "--fresh-depth`'s decoder of this width and depth, whatever the tower")
    recall_schedule: int | None = Field(default=None, ge=1, description="the steps the recall stage's rate "
                                        "schedule is planned over (None: recall_steps)")

    @property
    def is_vlm(self) -> bool:
        return self.arch in VLMS

    def key(self) -> str:
        """12 hex digits identifying the recipe: the sha256 of its canonical JSON, RECIPE_VERSION
        and, for a VLM on a zoo tower or started from a zoo member, that member's key (a changed
        tower or start rebuilds the VLM). Fields added later (`LATER_FIELDS`) enter the JSON only
        when they differ from their default, so the members made before them keep their keys."""
        tower_ref = self.tower_ref
        tower = recipe(tower_ref.location).key() if tower_ref is not None and tower_ref.kind == ZOO else None
        content = self.model_dump()
        for name in LATER_FIELDS:
            if content[name] == Recipe.model_fields[name].default:
                del content[name]
        if self.init_member is not None:
            content["init_key"] = recipe(self.init_member).key()
        text = json.dumps({"version": RECIPE_VERSION, "tower_key": tower, **content}, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    @property
    def tower_ref(self) -> ModelRef | None:
        """The model `tower` names (None: "scratch"): a recipe's fields are its config, read here."""
        return ModelRef.parse(self.tower) if self.tower != "scratch" else None

    @property
    def init_member(self) -> str | None:
        """The member name `init` starts from (None: a fresh model): a recipe's field, read here."""
        return ModelRef.parse(self.init).location if self.init else None

    def folder_name(self) -> str:
        return f"{self.name}-{self.key()}"


#: Recipe fields added after members were built: left out of the key at their default.
LATER_FIELDS = ("init", "defined_label_share", "recall_steps", "episode_steps", "augment", "chat_recall_steps",
                "named_steps", "project_steps", "episode_share", "lm_lr", "decoder_init", "recall_schedule")


def _dual(name: str, arch: str, **kw: Any) -> Recipe:
    return Recipe(name=name, arch=arch, **kw)  # type: ignore[arg-type]


#: The `--quick` members: small, seconds each, for the tests (a dual encoder of each loss and a
#: VLM of each architecture on one of their towers).
QUICK = (
    _dual("quick-clip", "clip", width=32, vision_width=32, patch_size=8, steps=30, batch_size=10, lr=2e-3,
          n_images=500, eval_images=50),
    _dual("quick-siglip", "siglip", width=32, vision_width=32, patch_size=8, steps=30, batch_size=10, lr=2e-3,
          n_images=500, eval_images=50),
    Recipe(name="quick-llava", arch="llava", width=32, vision_width=32, tower="zoo:quick-clip", tune_tower=False,
           align_steps=5, steps=10, batch_size=8, lr=2e-3, n_images=500, eval_images=20),
    Recipe(name="quick-idefics3", arch="idefics3", width=32, vision_width=32, tower="zoo:quick-siglip",
           tune_tower=False, align_steps=5, steps=10, batch_size=8, lr=2e-3, n_images=500, eval_images=20),
)

#: The full zoo: dual encoders of both losses at three sizes and budgets, VLMs of two
#: architectures on zoo towers (frozen, at two budgets on the same tower) and from scratch, at
#: several widths, depths and budgets, so that members spread from near chance to the best.
#: Every member is scored on the same 2,000 test-split images.
FULL = (
    _dual("clip-xs", "clip", width=32, vision_width=32, patch_size=8, steps=100, batch_size=10, lr=2e-3,
          eval_images=2000),
    _dual("clip-s", "clip", width=32, vision_width=32, patch_size=8, steps=600, batch_size=10, lr=2e-3,
          eval_images=2000),
    _dual("clip-m", "clip", width=64, vision_width=64, vision_depth=3, patch_size=8, steps=8000, batch_size=10,
          lr=2e-3, eval_images=2000),
    _dual("siglip-s", "siglip", width=32, vision_width=32, patch_size=8, steps=600, batch_size=10, lr=1e-3,
          eval_images=2000),
    _dual("siglip-m", "siglip", width=64, vision_width=64, patch_size=8, steps=6000, batch_size=10, lr=1e-3,
          eval_images=2000),
    Recipe(name="llava-clip-m", arch="llava", width=64, tower="zoo:clip-m", tune_tower=False,
           align_steps=200, steps=2000, batch_size=16, lr=2e-3, eval_images=2000),
    Recipe(name="llava-clip-m-short", arch="llava", width=64, tower="zoo:clip-m", tune_tower=False,
           align_steps=200, steps=150, batch_size=16, lr=2e-3, eval_images=2000),
    Recipe(name="llava-clip-s", arch="llava", width=32, vision_width=32, tower="zoo:clip-s", tune_tower=False,
           align_steps=100, steps=400, batch_size=16, lr=2e-3, eval_images=2000),
    Recipe(name="idefics3-siglip-m", arch="idefics3", width=64, tower="zoo:siglip-m", tune_tower=False,
           align_steps=200, steps=2000, batch_size=16, lr=2e-3, eval_images=2000),
    Recipe(name="idefics3-siglip-xs", arch="idefics3", width=32, tower="zoo:siglip-m", tune_tower=False,
           align_steps=50, steps=100, batch_size=16, lr=2e-3, eval_images=2000),
    Recipe(name="idefics3-scratch-s", arch="idefics3", width=32, vision_width=32, patch_size=8, steps=300,
           batch_size=16, lr=2e-3, eval_images=2000),
    Recipe(name="idefics3-scratch-m", arch="idefics3", width=64, depth=3, patch_size=8, steps=1000, batch_size=16,
           lr=1e-3, eval_images=2000),
    Recipe(name="llava-scratch-s", arch="llava", width=32, vision_width=32, patch_size=8, steps=300,
           batch_size=16, lr=2e-3, eval_images=2000),
    Recipe(name="llava-scratch-m", arch="llava", width=64, depth=3, patch_size=8, steps=1000, batch_size=16,
           lr=1e-3, eval_images=2000),
    # llava-clip-m tuned on, 3 in 4 of its samples defined-label sequences: the members above
    # ignore their demonstrations (defined-label accuracy at chance, docs/results/zoo-in-context.md)
    Recipe(name="llava-clip-m-icl", arch="llava", width=64, tower="zoo:clip-m", tune_tower=False,
           init="zoo:llava-clip-m", steps=2500, batch_size=16, lr=2e-3, eval_images=2000,
           defined_label_share=0.75),
)



def _augmented(name: str, **changes: Any) -> Recipe:
    """Full member `name`'s recipe with augmented pictures, named `<name>-aug` (its zoo tower the
    augmented one when `changes` says so)."""
    base = next(r for r in FULL if r.name == name)
    return base.model_copy(update={"name": f"{name}-aug", "augment": True, **changes})


#: Zoo II (issue 43): members pretrained on varied pictures (`-aug`: the recipe of the member of
#: that name, every training picture augmented, a VLM on the augmented tower), and a member taught
#: in context by the curriculum (`-curriculum`: `llava-clip-m`'s weights, then associative recall,
#: defined-label picture episodes and the instruction mix with defined-label sequences).
ZOO2 = (
    _augmented("clip-xs"), _augmented("clip-s"), _augmented("clip-m"), _augmented("siglip-s"),
    _augmented("siglip-m"),
    _augmented("llava-clip-m", tower="zoo:clip-m-aug"), _augmented("llava-clip-s", tower="zoo:clip-s-aug"),
    _augmented("idefics3-siglip-m", tower="zoo:siglip-m-aug"), _augmented("llava-scratch-m"),
    Recipe(name="llava-clip-m-curriculum", arch="llava", width=64, tower="zoo:clip-m", tune_tower=False,
           init="zoo:llava-clip-m", recall_steps=4000, episode_steps=1500, steps=500, batch_size=16, lr=2e-3,
           eval_images=2000, defined_label_share=0.5),
)
#: The quick curriculum and augmented members, for the tests.
QUICK_ZOO2 = (
    Recipe(name="quick-llava-curriculum", arch="llava", width=32, vision_width=32, tower="zoo:quick-clip",
           tune_tower=False, init="zoo:quick-llava", recall_steps=6, episode_steps=4, steps=4, batch_size=4,
           lr=2e-3, n_images=500, eval_images=20, defined_label_share=0.5),
    QUICK[0].model_copy(update={"name": "quick-clip-aug", "augment": True}),
)

#: Zoo III (issue 53): a language model first. A fresh decoder learns to copy in text (raw
#: associative recall under the schedule under which copying emerged in Zoo II, recall in the chat
#: layout, named defined-label episodes in text with the instruction questions in text), then the
#: projector alone aligns it to the frozen `clip-m` tower, then picture episodes and the
#: instruction mix tune connector and decoder, the decoder at a tenth of the rate.
ZOO3 = (
    Recipe(name="llava-clip-m-lmfirst", arch="llava", width=64, tower="zoo:clip-m", tune_tower=False,
           decoder_init="probe", recall_steps=2000, recall_schedule=4000, chat_recall_steps=500, named_steps=400,
           project_steps=200, steps=600, batch_size=16, lr=2e-3, lm_lr=2e-4, episode_share=0.5, eval_images=2000),
)
#: The quick language-model-first member, for the tests.
QUICK_ZOO3 = (
    Recipe(name="quick-llava-lmfirst", arch="llava", width=64, vision_width=32, tower="zoo:quick-clip",
           tune_tower=False, decoder_init="probe", recall_steps=1100, recall_schedule=4000, chat_recall_steps=4,
           named_steps=4, project_steps=3, steps=4, batch_size=16, lr=2e-3, lm_lr=2e-4, episode_share=0.5,
           n_images=500, eval_images=20),
)

RECIPES: dict[str, Recipe] = {r.name: r for r in (*QUICK, *FULL, *ZOO2, *QUICK_ZOO2, *ZOO3, *QUICK_ZOO3)}


def zoo_root() -> Path:
    """Where members live: $ROBUSTVLM_CACHE/zoo (else ~/.cache/robustvlm/zoo)."""
    return cache_dir() / "zoo"


def recipe(name: str) -> Recipe:
    """The recipe of member `name` (a ConfigError listing the members when unknown)."""
    if name not in RECIPES:
        raise ConfigError(f"unknown zoo member '{name}'; known: {sorted(RECIPES)}")
    return RECIPES[name]


def member_dir(r: Recipe) -> Path:
    """The folder member `r` is (or will be) saved in."""
    return zoo_root() / r.folder_name()


def resolve_model_ref(ref: ModelRef) -> ModelRef:
    """A zoo member ("zoo:NAME") -> the folder of member NAME (ConfigError when it is not built
    yet); any other reference unchanged, once `hub.checked_hub_name` let its name through (never
    a key-like name)."""
    if ref.kind != ZOO:
        checked_hub_name(ref.name)
        return ref
    member = recipe(ref.location)
    folder = member_dir(member)
    if not (folder / "config.json").is_file():
        raise ConfigError(f"zoo member '{member.name}' is not built ({folder} missing): "
                          f"run `robustvlm zoo build --members {member.name}`")
    return ModelRef.folder(folder)
