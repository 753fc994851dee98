"""Lines per group of models (pretraining source, family) and each group's effective robustness
against a baseline line, with bootstrap intervals; and a user's own models placed against a
published line. Pure functions on `ModelPoint`s (their `family` is the group).

Each group's line is `accuracy_on_the_line.fit_line` on its members (None when they have fewer
than two distinct reference accuracies). Its effective robustness (ER) is the mean over its
members of shifted accuracy minus the baseline line's prediction (fractions), with two
percentile intervals from `effective_robustness.er_estimate`: over models (the baseline's
models and the group's resampled, the line refitted) and, where every model has a question
count, over models and questions (each accuracy also redrawn from its count). The baseline is
one named group, or, when None, "the others": every model outside the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from robustvlm.analysis.accuracy_on_the_line import LineFit, ModelPoint, Transform, fit_line
from robustvlm.analysis.effective_robustness import ErEstimate, er_estimate
from robustvlm.errors import DataError

BASELINE = "\0baseline"  # the family given to the baseline's models inside er_estimate


@dataclass(frozen=True)
class GroupLine:
    """One group: its models, its own line (None: fewer than two distinct reference
    accuracies) and its ER against the baseline line (None for the baseline group itself)."""

    group: str
    models: int
    line: LineFit | None
    er_models: ErEstimate | None
    er_questions: ErEstimate | None

    def to_dict(self) -> dict:
        return {"group": self.group, "models": self.models, "line": self.line.to_dict() if self.line else None,
                "er_models": _estimate_dict(self.er_models), "er_questions": _estimate_dict(self.er_questions)}


def _estimate_dict(estimate: ErEstimate | None) -> dict | None:
    if estimate is None:
        return None
    return {"value": estimate.value, "ci": list(estimate.ci), "share_above": estimate.share_above,
            "n_boot": estimate.n_boot, "level": estimate.level}


def _line_or_none(members: Sequence[ModelPoint], kind: Transform) -> LineFit | None:
    try:
        return fit_line([p.acc_ref for p in members], [p.acc_shift for p in members], transform=kind)
    except DataError:
        return None


def place_against(base: Sequence[ModelPoint], models: Sequence[ModelPoint], *, kind: Transform = "probit",
                  n_boot: int = 2000, seed: int = 0, counts: bool = False) -> ErEstimate:
    """Mean ER of `models` against the line of `base` (>= 2 models), with its interval over
    models (and over questions, `counts`); names may repeat between the two lists."""
    tagged = [replace(p, model=f"base:{i}", family=BASELINE) for i, p in enumerate(base)]
    placed = [replace(p, model=f"model:{i}") for i, p in enumerate(models)]
    return er_estimate([*tagged, *placed], [p.model for p in placed], BASELINE, kind=kind, n_boot=n_boot,
                       seed=seed, counts=counts)


def group_lines(points: Sequence[ModelPoint], *, baseline: str | None = None, kind: Transform = "probit",
                n_boot: int = 2000, seed: int = 0) -> list[GroupLine]:
    """Every group's line and ER against `baseline`'s line (None: against the line of all the
    other groups' models), in order of first appearance (module doc)."""
    groups = list(dict.fromkeys(p.family for p in points))
    if baseline is not None and baseline not in groups:
        raise DataError(f"baseline group {baseline!r} is not among the groups {groups}")
    counts = all(p.n_ref > 0 and p.n_shift > 0 for p in points)
    out = []
    for group in groups:
        members = [p for p in points if p.family == group]
        base = [p for p in points if (p.family == baseline if baseline is not None else p.family != group)]
        er = [None, None] if group == baseline else [
            place_against(base, members, kind=kind, n_boot=n_boot, seed=seed, counts=c) for c in (False, True)]
        out.append(GroupLine(group, len(members), _line_or_none(members, kind), er[0], er[1] if counts else None))
    return out
