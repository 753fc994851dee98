"""chrF / chrF++ (Popović 2015, 2017) through sacrebleu, on the 0-1 scale.

Character n-grams up to order 6 (whitespace ignored), beta = 2 (recall weighted twice
as much as precision), sacrebleu's default "effective order" averaging: precision and
recall are averaged over the n-gram orders present in both strings, then combined into
one F-beta. ``word_order=2`` adds word uni- and bigrams (chrF++).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from robustvlm.errors import DataError
from robustvlm.evaluation.metrics.inputs import check_text_columns

if TYPE_CHECKING:
    from sacrebleu.metrics import CHRF

CHAR_ORDER = 6
BETA = 2


def _metric(word_order: int) -> CHRF:
    if word_order < 0:
        raise DataError(f"chrF word_order must be >= 0, got {word_order}")
    from sacrebleu.metrics import CHRF  # imported on first use: the CLI's help reads the registry

    return CHRF(char_order=CHAR_ORDER, word_order=word_order, beta=BETA)


def chrf_scores(
    predictions: Sequence[str], references: Sequence[str], *, word_order: int = 0
) -> list[float]:
    """Sentence-level chrF of each prediction against its reference.

    Args:
        predictions: N generated strings.
        references: N reference strings (one per prediction).
        word_order: 0 for chrF, 2 for chrF++.

    Returns:
        N scores on the 0-1 scale (sacrebleu's 0-100 value divided by 100).
    """
    check_text_columns("chrF", {"predictions": predictions, "references": references})
    metric = _metric(word_order)
    return [metric.sentence_score(p, [r]).score / 100.0 for p, r in zip(predictions, references)]


def corpus_chrf(
    predictions: Sequence[str], references: Sequence[str], *, word_order: int = 0
) -> float:
    """Corpus-level chrF: n-gram statistics summed over all N pairs, then one F-beta.

    Returns:
        One score on the 0-1 scale (not the mean of the sentence-level scores).
    """
    check_text_columns("chrF", {"predictions": predictions, "references": references})
    if not predictions:
        raise DataError("corpus chrF needs at least one prediction/reference pair")
    return _metric(word_order).corpus_score(list(predictions), [list(references)]).score / 100.0
