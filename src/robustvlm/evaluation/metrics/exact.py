"""Exact match of a generated answer against its reference, after one answer normalisation.

`normalize_answer` is the only definition of "the same answer" in robustvlm: generation
evaluation (`robustvlm eval`) and in-context evaluation (`robustvlm icl eval`) both use it.
The rule, in order:

1. lower case;
2. every character that is neither alphanumeric nor whitespace becomes a space (punctuation,
   symbols, underscores: "red-circle." -> "red circle");
3. one leading article ("a", "an", "the") is dropped when other words follow;
4. whitespace is collapsed to single spaces, none at either end.

Why a leading article only, unlike SQuAD's normaliser (which drops articles anywhere): a
generative model adds or omits a leading determiner freely ("a circle" for "circle"), which does
not change what the answer names; an article inside an answer is part of its wording ("the cat
on the mat", a title, a word to read off an image) and stays. A lone article is kept because it
is then the whole answer: a choice letter "A" must not equal "an" or an empty reply.
"""

from __future__ import annotations

from collections.abc import Sequence

from robustvlm.evaluation.metrics.inputs import check_text_columns

ARTICLES = frozenset({"a", "an", "the"})


def normalize_answer(text: str) -> str:
    """The form exact match compares (see the module docstring): "  The Circle." -> "circle"."""
    kept = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in text.lower())
    words = kept.split()
    if len(words) > 1 and words[0] in ARTICLES:
        words = words[1:]
    return " ".join(words)


def exact_match(predictions: Sequence[str], references: Sequence[str]) -> list[float]:
    """Exact match of each prediction against its reference.

    Args:
        predictions: N generated strings.
        references: N reference strings (one per prediction).

    Returns:
        N scores on the 0-1 scale: 1.0 where the normalised strings are equal, else 0.0.
    """
    check_text_columns("exact match", {"predictions": predictions, "references": references})
    return [
        float(normalize_answer(p) == normalize_answer(r)) for p, r in zip(predictions, references)
    ]
