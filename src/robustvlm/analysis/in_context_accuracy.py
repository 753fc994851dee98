"""In-context evaluation's numbers: per-domain accuracy of each (shots, demo policy) cell, the
gain over zero-shot and the cost of a shifted demo policy. Pure functions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

ALL_DOMAINS = "all"  # the cell pooling every domain


@dataclass(frozen=True)
class IclCell:
    """Accuracy of one (shots, policy) setting on one domain.

    Attributes:
        shots, policy, domain: the setting ("zero-shot" policy for 0 shots; domain "all" pools).
        n, correct, accuracy: queries, right answers, and their ratio (0-1).
        gain: accuracy minus the domain's 0-shot accuracy (None for 0 shots or without it).
        cost: accuracy of `random` demos at the same shots minus this accuracy: positive when a
            shifted policy hurts (None without the `random` cell).
    """

    shots: int
    policy: str
    domain: str
    n: int
    correct: int
    accuracy: float
    gain: float | None = None
    cost: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def accuracy_cells(shots: int, policy: str, records: Sequence[Mapping]) -> list[IclCell]:
    """One cell per domain (and "all") from per-query records {domain, correct}, domains sorted."""
    groups: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        groups[r["domain"]].append(bool(r["correct"]))
        groups[ALL_DOMAINS].append(bool(r["correct"]))
    return [
        IclCell(shots, policy, d, len(c), int(sum(c)), sum(c) / len(c))
        for d, c in sorted(groups.items())
    ]


def icl_summary(cells: Sequence[IclCell]) -> list[IclCell]:
    """The cells with `gain` and `cost` filled in (see IclCell)."""
    zero = {c.domain: c.accuracy for c in cells if c.shots == 0}
    rand = {(c.shots, c.domain): c.accuracy for c in cells if c.policy == "random"}
    return [
        replace(
            c,
            gain=c.accuracy - zero[c.domain] if c.shots > 0 and c.domain in zero else None,
            cost=rand[(c.shots, c.domain)] - c.accuracy if c.shots > 0 and (c.shots, c.domain) in rand else None,
        )
        for c in cells
    ]
