"""Accuracy of multiple-choice answers with its Clopper-Pearson interval; circular evaluation.
Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from robustvlm.analysis.stats import clopper_pearson
from robustvlm.errors import DataError


def circular_correct(per_rotation_correct: Sequence[bool]) -> bool:
    """Circular evaluation: a question counts as right only if every rotation was answered right."""
    if len(per_rotation_correct) == 0:
        raise DataError("circular evaluation needs the result of at least one rotation")
    return all(per_rotation_correct)


@dataclass(frozen=True)
class AccuracySummary:
    """accuracy = k / n with its 95% Clopper-Pearson interval, and the replies no option could
    be read from (counted wrong, reported apart)."""

    accuracy: float
    n: int
    ci_lo: float
    ci_hi: float
    unparsed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def accuracy_summary(rows: Sequence[Mapping[str, Any]], *, circular: bool) -> AccuracySummary:
    """Summary of scored question rows {id, correct, prediction}; with `circular`, n counts
    question ids, each right only if all its rotations are."""
    if circular:
        by_id: dict[str, list[bool]] = {}
        for r in rows:
            by_id.setdefault(str(r["id"]), []).append(bool(r["correct"]))
        outcomes = [circular_correct(v) for v in by_id.values()]
    else:
        outcomes = [bool(r["correct"]) for r in rows]
    if not outcomes:
        raise DataError("no scored questions to summarize")
    k, n = sum(outcomes), len(outcomes)
    lo, hi = clopper_pearson(k, n)
    return AccuracySummary(k / n, n, lo, hi, sum(r["prediction"] is None for r in rows))
