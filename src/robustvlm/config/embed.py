"""An embedding run's config (`robustvlm embed train CONFIG`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from robustvlm.config.base import _Section
from robustvlm.config.data import DataConfig
from robustvlm.config.model import LoraConfig, ModelConfig
from robustvlm.config.train import TrainConfig

#: The instruction around a question in a VLM2Vec query (the paper's wording).
QUERY_TEMPLATE = "Represent the given image with the following question: {question}"


class EmbedLoraConfig(LoraConfig):
    """LoRA as VLM2Vec ships it: rank 16, alpha 64, dropout 0.1."""

    alpha: int = Field(default=64, ge=1)
    dropout: float = Field(default=0.1, ge=0, lt=1)


class EmbedModelConfig(ModelConfig):
    """The VLM turned into an embedding model: LoRA on its text decoder by default."""

    trainable: Literal["paper", "full", "lora"] = "lora"
    lora: EmbedLoraConfig = Field(default_factory=EmbedLoraConfig)


class EmbedTrainConfig(TrainConfig):
    """Optimisation of an embedding model: plain shuffled batches by default (in-batch negatives
    need no environment balance)."""

    sampler: Literal["balanced", "shuffle"] = "shuffle"


class EmbedSettings(_Section):
    """Contrastive (InfoNCE) embedding training (`robustvlm embed train`).

    `chunk_size` turns on gradient caching: the batch is embedded `chunk_size` rows at a time
    (memory of one chunk, the same loss and gradients); None embeds the whole batch in one pass.
    Records of environments matching a `caption_envs` pattern (fnmatch, e.g. "caption*" or "*")
    are caption pairs, whose query is the image alone; all others are VQA pairs, whose query is
    the image with `query_template` filled with the record's instruction. `class_templates` are
    what zero-shot classification fills with class names (saved with the model).
    `distinct_negatives`: a target with the same text as a row's own target is no negative of it
    (robustvlm's option, not VLM2Vec's: its InfoNCE counts every other in-batch target as a
    negative, the default here too; with few distinct answers most of a batch would be false
    negatives, which is why the task-signal experiment turns it on).
    """

    temperature: float = Field(default=0.02, gt=0)
    chunk_size: int | None = Field(default=None, ge=1)
    query_template: str = QUERY_TEMPLATE
    caption_envs: list[str] = Field(default_factory=list)
    class_templates: list[str] = Field(default_factory=lambda: ["{class}"])
    distinct_negatives: bool = False

    @model_validator(mode="after")
    def _templates(self) -> EmbedSettings:
        if "{question}" not in self.query_template:
            raise ValueError("embed.query_template must hold {question}")
        if not self.class_templates or any("{class}" not in t for t in self.class_templates):
            raise ValueError("embed.class_templates must be non-empty and each hold {class}")
        return self


class EmbedRunConfig(_Section):
    """An embedding training run: model, data, embedding settings, training."""

    model: EmbedModelConfig = Field(default_factory=EmbedModelConfig)
    data: DataConfig
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    train: EmbedTrainConfig = Field(default_factory=EmbedTrainConfig)
