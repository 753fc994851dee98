"""The task-signal experiment's config (`robustvlm robustness task-signal [CONFIG]`)."""

from __future__ import annotations

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from robustvlm.config.base import _Section
from robustvlm.config.embed import EmbedModelConfig, EmbedSettings, EmbedTrainConfig


class ProbeSettings(_Section):
    """The linear-probe family: logistic regression on the frozen tower's features of
    `n_train` training images (each size x seed is one model), L2 strength 1 / `c`."""

    n_train: list[PositiveInt] = Field(default_factory=lambda: [40, 80, 160, 320])
    seeds: list[NonNegativeInt] = Field(default_factory=lambda: [0, 1])
    c: float = Field(default=1.0, gt=0)


class TaskSignalConfig(_Section):
    """The task-signal experiment (`robustvlm robustness task-signal`) on the `domains` digits.
    The packaged configs/task_signal.yaml holds the built-in values; a user's config is merged
    over it.

    One base VLM is built (and pretrained generatively for `base_steps` on the training images'
    captions and questions alike; 0: a hub model as it is), its vision tower frozen for every
    family. Each family trains
    embedding models (`model`, `train`, `embed` as in `embed train`) on the same training images
    with a share `families[name]` of VQA pairs (0 = captions only, 1 = questions only), for every
    seed x budget (optimizer steps). Images: `per_class` scans per digit and style; a seeded
    `test_fraction` of the scans is held out in every style. Training images: the other scans in
    `train_styles`; reference: held-out scans in `reference`; shifts: held-out scans in each of
    `shifts`. Questions have `k_options` options (random distractors).
    """

    per_class: int = Field(default=60, ge=2)
    test_fraction: float = Field(default=0.25, gt=0, lt=1)
    reference: str = "clean"
    train_styles: list[str] = Field(default_factory=lambda: ["clean", "rotated", "noisy"])
    shifts: list[str] = Field(default_factory=lambda: ["rotated", "noisy", "coloured"])
    k_options: int = Field(default=10, ge=2, le=10)
    base_steps: int = Field(default=300, ge=0)
    families: dict[str, float] = Field(default_factory=lambda: {"caption": 0.0, "mix": 0.5, "vqa": 1.0})
    seeds: list[NonNegativeInt] = Field(default_factory=lambda: [0, 1])
    budgets: list[PositiveInt] = Field(default_factory=lambda: [100, 200, 400])
    model: EmbedModelConfig = Field(default_factory=lambda: EmbedModelConfig(trainable="paper"))
    train: EmbedTrainConfig = Field(default_factory=EmbedTrainConfig)
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    probe: ProbeSettings = Field(default_factory=ProbeSettings)
    n_boot: int = Field(default=2000, ge=100)
    workers: int = Field(default=2, ge=1)

    @model_validator(mode="after")
    def _check(self) -> TaskSignalConfig:
        if not self.families or any(not 0 <= s <= 1 for s in self.families.values()):
            raise ValueError("families: give {name: VQA share in [0, 1]}")
        if "caption" not in self.families or "vqa" not in self.families:
            raise ValueError("families must include 'caption' (share 0) and 'vqa' (share 1): the lift is vqa over caption")
        if self.families["caption"] != 0 or self.families["vqa"] != 1:
            raise ValueError("families.caption must be 0 and families.vqa 1")
        if self.reference not in self.train_styles:
            raise ValueError("reference must be one of train_styles")
        if len(self.seeds) * len(self.budgets) < 2:
            raise ValueError("a family line needs at least two models: give more seeds or budgets")
        return self
