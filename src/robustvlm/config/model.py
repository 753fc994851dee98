"""Which VLM a run trains and which parts of it train (LoRA settings included)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from robustvlm.config.base import _Section
from robustvlm.model_ref import ModelRef


class LoraConfig(_Section):
    """PEFT LoRA settings (used when `model.trainable: lora`)."""

    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.05, ge=0, lt=1)
    target_modules: list[str] | str | None = None


class ModelConfig(_Section):
    """Which VLM to fine-tune and which parts train.

    `name` is a hub name (e.g. HuggingFaceTB/SmolVLM-Base), a local path, or
    `tiny:<model_type>` (an architecture of `models.support`, built offline, tokenizer trained on the
    training text).
    `gradient_checkpointing` recomputes activations in the backward pass instead of storing them
    (a real 2B VLM with hundreds of image tokens needs it; results are unchanged).
    """

    name: str = "tiny:idefics3"
    trust_remote_code: bool = False
    trainable: Literal["paper", "full", "lora"] = "paper"
    lora: LoraConfig = Field(default_factory=LoraConfig)
    gradient_checkpointing: bool = False
    tiny: dict[str, Any] = Field(default_factory=dict)

    @property
    def ref(self) -> ModelRef:
        """`name` parsed (`model_ref.ModelRef`): its kind, location and capabilities."""
        return ModelRef.parse(self.name)


class _Run(_Section):
    """What every kind of training run has: the model it trains."""

    model: ModelConfig = Field(default_factory=ModelConfig)
