"""chrF wrapper vs an independent from-scratch chrF and vs sacrebleu called directly."""

from __future__ import annotations

import string
from collections import Counter

import pytest
import sacrebleu

from robustvlm.errors import DataError
from robustvlm.evaluation.metrics.chrf import chrf_scores, corpus_chrf

PAIRS = [
    ("the cat sat on the mat", "the cat sat on the mat"),
    ("the cat sat on the mat", "a cat was sitting on the mat"),
    ("Total revenue: $1,234.", "The total revenue is $1,234."),
    ("ab", "abcdefgh"),  # hypothesis has no n-grams above order 2
    ("xyz", "abc"),  # nothing in common
    ("", "something"),  # empty hypothesis
    ("(hello) world, again!", "hello world again"),
    ("été à Paris", "l'été à Paris"),
]


def _char_ngrams(text: str, n: int) -> Counter:
    chars = text.replace(" ", "").replace("\t", "").replace("\n", "")
    return Counter(chars[i : i + n] for i in range(len(chars) - n + 1))


def _split_words(text: str) -> list[str]:
    """Words with one leading or trailing punctuation mark split off (chrF++ tokenisation)."""
    words = []
    for w in text.split():
        if len(w) > 1 and w[-1] in string.punctuation:
            words += [w[:-1], w[-1]]
        elif len(w) > 1 and w[0] in string.punctuation:
            words += [w[0], w[1:]]
        else:
            words.append(w)
    return words


def _word_ngrams(text: str, n: int) -> Counter:
    words = _split_words(text)
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def _order_stats(hyp: str, ref: str, word_order: int) -> list[tuple[int, int, int]]:
    """(hyp n-grams, ref n-grams, matches) per order: characters 1..6, then words."""
    pairs = [(_char_ngrams(hyp, n), _char_ngrams(ref, n)) for n in range(1, 7)]
    pairs += [(_word_ngrams(hyp, n), _word_ngrams(ref, n)) for n in range(1, word_order + 1)]
    return [
        (sum(h.values()), sum(r.values()), sum((h & r).values())) for h, r in pairs
    ]


def _f_beta(stats: list[tuple[int, int, int]], beta: float = 2.0) -> float:
    """Average P and R over orders present in both strings, then F-beta (Popović 2015)."""
    present = [(m / h, m / r) for h, r, m in stats if h > 0 and r > 0]
    if not present:
        return 0.0
    p = sum(x for x, _ in present) / len(present)
    r = sum(y for _, y in present) / len(present)
    if p + r == 0:
        return 0.0
    return (1 + beta**2) * p * r / (beta**2 * p + r)


def reference_chrf(hyp: str, ref: str, word_order: int = 0) -> float:
    return _f_beta(_order_stats(hyp, ref, word_order))


def reference_corpus_chrf(hyps: list[str], refs: list[str], word_order: int = 0) -> float:
    per_pair = [_order_stats(h, r, word_order) for h, r in zip(hyps, refs)]
    summed = [tuple(sum(col) for col in zip(*order)) for order in zip(*per_pair)]
    return _f_beta(summed)


@pytest.mark.parametrize("word_order", [0, 2])
def test_sentence_scores_match_from_scratch_chrf(word_order):
    hyps, refs = zip(*PAIRS)
    got = chrf_scores(list(hyps), list(refs), word_order=word_order)
    want = [reference_chrf(h, r, word_order) for h, r in PAIRS]
    assert got == pytest.approx(want, abs=1e-12)
    assert got[0] == pytest.approx(1.0)
    assert got[4] == 0.0 and got[5] == 0.0
    assert all(0.0 <= s <= 1.0 for s in got)


@pytest.mark.parametrize("word_order", [0, 2])
def test_sentence_scores_match_sacrebleu_on_0_1_scale(word_order):
    hyps, refs = zip(*PAIRS)
    got = chrf_scores(list(hyps), list(refs), word_order=word_order)
    want = [
        sacrebleu.sentence_chrf(h, [r], word_order=word_order).score / 100 for h, r in PAIRS
    ]
    assert got == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("word_order", [0, 2])
def test_corpus_score_pools_statistics(word_order):
    hyps, refs = (list(x) for x in zip(*PAIRS))
    got = corpus_chrf(hyps, refs, word_order=word_order)
    assert got == pytest.approx(reference_corpus_chrf(hyps, refs, word_order), abs=1e-12)
    direct = sacrebleu.corpus_chrf(hyps, [refs], word_order=word_order).score / 100
    assert got == pytest.approx(direct, abs=1e-12)


def test_bad_input_raises_data_error():
    with pytest.raises(DataError, match="2 predictions and 1 references"):
        chrf_scores(["a", "b"], ["a"])
    with pytest.raises(DataError, match=r"\[1\]|:1"):
        chrf_scores(["a", None], ["a", "b"])
    with pytest.raises(DataError, match="at least one"):
        corpus_chrf([], [])
    assert chrf_scores([], []) == []
