"""What every results reader returns: aggregate accuracy rows and, where the file has them,
per-question rows. Plain dicts, so that `robustness fit` and `compare` read them as they read
their own files.

An accuracy row: {"model", "family", "bench", "accuracy" (fraction), "n" (questions, or None
when the file does not say), "n_from" ("file" | "table" | "user", set when n is known),
"line" (where the record sits: a line number or a name), plus the reader's own columns
(e.g. "pretrained", "source")}.

A question row: {"model", "bench", "id", "correct" (0/1, or a score in [0, 1]), "env" (the
question's group: a category, a split), "line"}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from robustvlm.data.results.skips import Skip
from robustvlm.errors import DataError


@dataclass(frozen=True)
class ReadOptions:
    """What the user chose about reading: `run` (lmms-eval: read the run of this DATE, not the
    latest of each task), `allow_non_accuracy` (read scores that are not an accuracy over a
    counted set, e.g. open_clip's mean per-class recall columns, marked as such) and `strict`
    (a record left out is an error, not a listed skip)."""

    run: str | None = None
    allow_non_accuracy: bool = False
    strict: bool = False


@dataclass
class ResultTable:
    """A results file read: `accuracies` (one row per model and benchmark), `questions` (one
    row per model, benchmark and question; empty when the file has aggregates only) and
    `skipped` (records left out on purpose, each saying which and why: `skips.report_skips`)."""

    accuracies: list[dict] = field(default_factory=list)
    questions: list[dict] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)

    def skip(self, file: str, record: str | int, why: str) -> None:
        """List a record left out (file, where in it, why)."""
        self.skipped.append(Skip(str(file), str(record), why))


def fraction(value: object, what: str, source: str, record: str | int) -> float:
    """`value` as a fraction in [0, 1] (DataError naming `source` and `record` otherwise; a boolean
    is refused, not read as 0 or 1)."""
    if isinstance(value, bool):
        raise DataError(f"{what} must be a number, got the boolean {value!r}", source, record)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataError(f"{what} must be a number, got {value!r}", source, record) from None
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise DataError(f"{what} must be a fraction in [0, 1], got {value!r}", source, record)
    return number


def count(value: object, what: str, source: str, record: str | int) -> int:
    """`value` as a positive whole number of questions (DataError otherwise; a boolean too)."""
    if isinstance(value, bool):
        raise DataError(f"{what} must be an integer, got the boolean {value!r}", source, record)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataError(f"{what} must be an integer, got {value!r}", source, record) from None
    if not number.is_integer() or number < 1:
        raise DataError(f"{what} must be a positive integer, got {value!r}", source, record)
    return int(number)


def accuracy_row(model: str, family: str, bench: str, accuracy: float, n: int | None,
                 line: str | int, **extra: str) -> dict:
    """One accuracy row (module doc); `n` None when the file does not give it."""
    return {"model": model, "family": family, "bench": bench, "accuracy": accuracy, "n": n,
            "n_from": "file" if n is not None else None, "line": line, **extra}


def accuracies_from_questions(questions: list[dict], family: str = "") -> list[dict]:
    """One accuracy row per (model, bench) of per-question rows: the mean score over the
    questions, n their number (from the file)."""
    grouped: dict[tuple[str, str], list[dict]] = {}
    for row in questions:
        grouped.setdefault((row["model"], row["bench"]), []).append(row)
    return [accuracy_row(model, family or model, bench, sum(r["correct"] for r in rows) / len(rows), len(rows),
                         rows[0]["line"])
            for (model, bench), rows in grouped.items()]
