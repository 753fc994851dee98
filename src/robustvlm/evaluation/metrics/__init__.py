"""Generation metrics: chrF (sacrebleu), exact match, BERTScore (greedy matching) and the CEE
LLM-judge score; `registry` declares each once for eval, studies, reports and the CLI.

The names below are imported from their modules on first use, so that importing one metric
module (e.g. the registry, read by the command line's help) does not load the others' libraries
(torch and transformers for BERTScore, pydantic for the judge).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_MODULE_OF = {
    "BERTScorer": "bertscore",
    "CEEJudge": "judge",
    "CEEResult": "judge",
    "JudgeError": "judge",
    "chrf_scores": "chrf",
    "corpus_chrf": "chrf",
    "exact_match": "exact",
    "normalize_answer": "exact",
}

def __getattr__(name: str) -> Any:  # a class or a function, by name
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
