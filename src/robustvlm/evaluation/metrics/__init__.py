"""Generation metrics: chrF (sacrebleu), BERTScore (greedy matching) and the CEE LLM-judge score.

``BERTScorer`` is imported on first use so that chrF and the judge load without torch
and transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robustvlm.evaluation.metrics.chrf import chrf_scores, corpus_chrf
from robustvlm.evaluation.metrics.judge import CEEJudge, CEEResult, JudgeError

if TYPE_CHECKING:
    from robustvlm.evaluation.metrics.bertscore import BERTScorer

__all__ = [
    "BERTScorer",
    "CEEJudge",
    "CEEResult",
    "JudgeError",
    "chrf_scores",
    "corpus_chrf",
]


def __getattr__(name: str):
    if name == "BERTScorer":
        from robustvlm.evaluation.metrics.bertscore import BERTScorer

        return BERTScorer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
