"""Generation and scoring settings of `eval` (BERTScore and the judge included)."""

from __future__ import annotations

from pydantic import Field

from robustvlm.config.base import _Section
from robustvlm.config.endpoints import JudgeConfig


class BERTScoreConfig(_Section):
    """BERTScore encoder: any HF encoder name/path and layer (default: offline all-MiniLM-L6-v2)."""

    model: str | None = None
    layer: int | None = Field(default=None, ge=0)
    idf: bool = False
    batch_size: int = Field(default=32, ge=1)


class EvalConfig(_Section):
    """Generation and scoring settings: greedy, 128 new tokens, no repetition penalty (1.0), the
    same for a local and a served model (the Dynamic BIRM paper's recipe sets 1.15 explicitly).

    `metrics` names metrics of `robustvlm.evaluation.metrics.registry` (checked there, where the
    config is used, since this layer does not know them): chrF and exact match are always
    computed; `bertscore` and `cee` (the LLM-judge ensemble, which needs `judge`: an
    OpenAI-compatible endpoint) are added after generation.
    """

    metrics: list[str] = Field(default_factory=lambda: ["chrf", "exact"])
    bertscore: BERTScoreConfig = Field(default_factory=BERTScoreConfig)
    judge: JudgeConfig | None = None
    split: str = "test"
    batch_size: int = Field(default=8, ge=1)
    max_new_tokens: int = Field(default=128, ge=1)
    repetition_penalty: float = Field(default=1.0, gt=0, description="1.0: none (every command's default)")
    max_per_env: int | None = Field(default=None, ge=1)
