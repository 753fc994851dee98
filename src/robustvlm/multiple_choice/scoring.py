"""How a multiple-choice question is scored by a model: by what its family supports.

A generative VLM scores by option log-likelihood ("loglik", see `generative`) or by generation and
answer extraction ("generate"); a dual encoder (CLIP, SigLIP) or an embedding model (VLM2Vec)
by query-option similarity with a template ensemble ("similarity", see `similarity`). A scorer maps a batch of questions to one
row each: prediction (option index, None = unparsed), scores (the K option scores:
log-likelihoods in nats, cosine similarities, or None for generation), plus `response`
(generation) or `n_tokens` (log-likelihood). Scoring many models into results.csv is
`workflows.mc_eval`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from robustvlm.errors import ConfigError, DataError
from robustvlm.models.backends import BACKENDS, Backend
from robustvlm.multiple_choice.build import MCQuestion, read_questions, rotations
from robustvlm.multiple_choice.generative import extract_choice, generate_answers, question_logliks
from robustvlm.multiple_choice.similarity import SimilarityScorer

METHODS = ("loglik", "generate")

# questions -> one row (without id/rotation/answer/correct) per question
Scorer = Callable[[list[MCQuestion]], list[dict[str, Any]]]


def _by_similarity(backend: Backend, normalize: bool, **decoding: Any) -> Scorer:
    scorer = SimilarityScorer(backend)

    def score(questions: list[MCQuestion]) -> list[dict[str, Any]]:
        return [{"prediction": max(range(len(s)), key=s.__getitem__), "scores": s} for s in scorer.score(questions)]

    return score


def _by_generation(backend: Backend, normalize: bool, **decoding: Any) -> Scorer:
    def score(questions: list[MCQuestion]) -> list[dict[str, Any]]:
        replies = generate_answers(backend, questions, **decoding)
        return [{"prediction": extract_choice(r, q.options), "scores": None, "response": r}
                for q, r in zip(questions, replies)]

    return score


def _by_loglik(backend: Backend, normalize: bool, **decoding: Any) -> Scorer:
    def score(questions: list[MCQuestion]) -> list[dict[str, Any]]:
        rows = []
        for q in questions:
            scores = question_logliks(backend, q)
            rows.append({"prediction": scores.prediction(normalize),
                         "scores": scores.mean if normalize else scores.sum, "n_tokens": scores.n_tokens})
        return rows

    return score


# way of scoring -> (the capabilities it needs, its scorer); `make_scorer` picks one
SCORERS: dict[str, tuple[tuple[str, ...], Callable[..., Scorer]]] = {
    "loglik": (("option_loglik",), _by_loglik),
    "generate": (("generate",), _by_generation),
    "similarity": (("image_embed", "text_embed"), _by_similarity),
}


def scoring_method(family: str, method: str) -> str:
    """How a model of `family` is scored when `method` is asked for: `method` ("loglik" or
    "generate") when the family supports it, else "similarity" when it embeds images and texts
    (dual encoders and embedding models, for which `method` does not apply). Raises ConfigError naming what the family
    supports otherwise."""
    declared = BACKENDS[family].capabilities
    for way in (method, "similarity"):
        if set(SCORERS[way][0]) <= declared:
            return way
    raise ConfigError(
        f"family {family!r} does not support {', '.join(SCORERS[method][0])}; it supports "
        f"{', '.join(sorted(declared))}"
    )


def make_scorer(backend: Backend, *, way: str, normalize: bool, **decoding: Any) -> Scorer:
    """The per-batch scoring function of a loaded model, for a way from `scoring_method`;
    `decoding` (max_new_tokens, repetition_penalty) is the generating way's (`generate_answers`)."""
    backend.require(*SCORERS[way][0])
    return SCORERS[way][1](backend, normalize, **decoding)


def load_bench(
    bench: Path, circular: bool, *, image_root: str | Path | None = None, allow_outside_root: bool = False
) -> list[MCQuestion]:
    """A question file's questions (image paths confined as `read_questions` says); with
    `circular`, every rotation of each (unless the file already holds them). A question id and
    rotation occurring twice is a DataError."""
    questions = read_questions(bench, image_root=image_root, allow_outside_root=allow_outside_root)
    if circular and all(q.rotation == 0 for q in questions):
        questions = [r for q in questions for r in rotations(q)]
    seen: set[tuple[str, int]] = set()
    for q in questions:
        key = (q.id, q.rotation)
        if key in seen:
            raise DataError(f"{bench}: question id {q.id!r} rotation {q.rotation} occurs twice", str(bench), q.id)
        seen.add(key)
    return questions
