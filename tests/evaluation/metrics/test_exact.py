"""Exact match: the one answer normalisation shared by generation and in-context evaluation
(tests/evaluation/test_in_context.py checks that in-context evaluation's `correct` is this comparison)."""

import pytest

from robustvlm.errors import DataError
from robustvlm.evaluation.metrics.exact import exact_match, normalize_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        ("  The Circle.", "circle"),  # eval kept "the circle", icl dropped the article: now one rule
        ("a cross!", "cross"),
        ("An owl", "owl"),
        ("red-circle,  blue\tsquare", "red circle blue square"),
        ("hot_dog", "hot dog"),  # underscores are not word characters here (icl's \w kept them)
        ("the cat on the mat", "cat on the mat"),  # only a leading article goes
        ("theory", "theory"),  # an article is a whole word, not a prefix
        ("the the", "the"),  # one article at most
        ("A", "a"),  # a lone article is the answer itself (a choice letter)
        ("The.", "the"),
        ("42", "42"),
        ("Élan", "élan"),  # non-ASCII letters are letters
        ("", ""),
        (" ?! ", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_scores_on_the_0_1_scale():
    predictions = ["The circle.", "square circle", "an", "", "A"]
    references = ["circle", "circle", "a", "a", "a."]
    assert exact_match(predictions, references) == [1.0, 0.0, 0.0, 0.0, 1.0]


def test_exact_match_checks_its_inputs():
    with pytest.raises(DataError, match="exact match needs one of each per sample"):
        exact_match(["a"], [])
    with pytest.raises(DataError, match="exact match takes strings"):
        exact_match([None], ["a"])
