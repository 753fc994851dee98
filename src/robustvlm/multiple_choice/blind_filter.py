"""Drop the questions a blind model answers (MMStar-style curation): `mc build --filter-blind`.

A question whose answer a model finds without the image measures the model's language prior,
not its vision. The rule, precisely: every cyclic rotation of the question's options is scored
by the model with the image removed (`models.blind`: a text-only prompt, or a blank image of the
same size for families that need one; rotations already in a circular benchmark are used as
they are); the question, with all its rotations, is dropped when the blind prediction is right
in every rotation. A model guessing at random keeps each K-option question with probability
1 - (1/K)^K (K=5: 99.97%), and one that always picks the same letter is right in exactly one
rotation, so it drops nothing: what is dropped is answered from the text alone, above chance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from robustvlm.model_ref import ModelRef
from robustvlm.multiple_choice.build import MCQuestion, rotations
from robustvlm.multiple_choice.scoring import Scorer

RULE = ("dropped when the blind model (image removed) picks the right option in every cyclic "
        "rotation of the options")


@dataclass(frozen=True)
class FilterReport:
    """What the blind filter did: the model, how it was scored, the questions (ids) it saw and
    dropped, per environment too, and the dropped ids."""

    model: str
    method: str
    blind_input: str
    questions: int
    dropped: int
    per_env: dict[str, dict[str, int]]
    dropped_ids: list[str] = field(default_factory=list)
    rule: str = RULE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def all_rotations(questions: Sequence[MCQuestion]) -> dict[str, list[MCQuestion]]:
    """question id -> its rotations: those in `questions` when it holds several, else every
    rotation of its one question."""
    by_id: dict[str, list[MCQuestion]] = {}
    for q in questions:
        by_id.setdefault(q.id, []).append(q)
    return {i: qs if len(qs) > 1 else rotations(qs[0]) for i, qs in by_id.items()}


def answered_blind(questions: Sequence[MCQuestion], scorer: Scorer, *, batch_size: int = 8) -> dict[str, bool]:
    """question id -> True when `scorer` (a blind one) is right in every rotation."""
    grouped = all_rotations(questions)
    todo = [q for qs in grouped.values() for q in qs]
    right: dict[str, bool] = {i: True for i in grouped}
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        for q, row in zip(batch, scorer(batch)):
            right[q.id] = right[q.id] and row["prediction"] == q.answer
    return right


def drop_answered(
    questions: Sequence[MCQuestion], answered: dict[str, bool], *, model: ModelRef, method: str, blind_input: str
) -> tuple[list[MCQuestion], FilterReport]:
    """(the questions whose id is not answered blind, in order; the FilterReport)."""
    env_of = {q.id: q.source for q in questions}
    per_env: dict[str, dict[str, int]] = {}
    for qid, env in env_of.items():
        counts = per_env.setdefault(env, {"questions": 0, "dropped": 0})
        counts["questions"] += 1
        counts["dropped"] += int(answered[qid])
    dropped = [qid for qid in env_of if answered[qid]]
    kept = [q for q in questions if not answered[q.id]]
    report = FilterReport(model.name, method, blind_input, len(env_of), len(dropped),
                          dict(sorted(per_env.items())), dropped)
    return kept, report
