"""Each study method against the baseline on per-question correctness, per environment: the
paired difference with its paired bootstrap interval and standard error, the questions a
difference needs at 80% power (`analysis.paired.compare_paired`), and the exact McNemar test of
every seed (`analysis.paired.mcnemar_exact`).

Input: {method label: {seed: rows}}, rows as in predictions.jsonl ({"id", "env", "scores"}).
Correctness is every 0/1 score the rows carry: `exact` (exact match, scored on every row) and
`cee` (the judge's verdict) where computed. A question is paired within a seed (method seed s
against baseline seed s, same id) where both scored it (None: undecided, left out and counted);
its score on each side is then averaged over those seeds, so the difference, interval, SE and
power line are per question (the bootstrap resamples questions). A seed-averaged score is not 0/1
with several seeds, so the McNemar test runs on each seed's own 0/1 pairs instead.

`paired_verdict` adds the across-seed count and the questions a margin needs: the verdict of the
demos whose seeds score one shared test set (the invariance ladder, the reward matrices).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robustvlm.analysis.paired import (
    PairedComparison,
    compare_paired,
    mcnemar_exact,
    questions_needed,
)

CORRECTNESS_METRICS = ("exact", "cee")
ALL = "all"

#: {group: {question id: [(seed, method score, baseline score)]}}
Pairs = dict[str, dict[str, list[tuple[str, float, float]]]]


@dataclass(frozen=True)
class StudyPaired:
    """One method against the baseline in one group (an environment or ALL) on one metric: the
    comparison of seed-averaged scores, each seed's (only method right, only baseline right,
    exact McNemar p), and the (seed, question) pairs left out as undecided on either side."""

    comparison: PairedComparison
    seed_mcnemar: dict[str, tuple[int, int, float]]
    undecided: int

    def to_dict(self) -> dict[str, Any]:
        return {**self.comparison.to_dict(), "undecided": self.undecided,
                "mcnemar_per_seed": {s: {"only_method": a, "only_baseline": b, "p": p}
                                     for s, (a, b, p) in self.seed_mcnemar.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudyPaired:
        """Read back what `to_dict` wrote."""
        mcnemar = {s: (t["only_method"], t["only_baseline"], t["p"]) for s, t in data["mcnemar_per_seed"].items()}
        return cls(PairedComparison.from_dict(data), mcnemar, data["undecided"])


@dataclass(frozen=True)
class PairedVerdict:
    """A method against a baseline on one group of shared questions, pooled over seeds, with the
    across-seed count beside it.

    Attributes:
        paired: the comparison pooled over seeds (difference in 0-1 units; its interval, the
            per-seed McNemar counts and p-values).
        seeds_won, seeds: seeds (shared by both) where the method answered more questions right.
        needed: questions (with these seeds) that a difference of the observed size, at least
            the caller's margin, needs at 80% power (`analysis.paired.questions_needed`); None
            when the paired differences have no spread.
        left_out: runs of either side that could not be paired (e.g. kept from before their
            per-question answers were recorded).
    """

    paired: StudyPaired
    seeds_won: int
    seeds: int
    needed: float | None
    left_out: int = 0

    @property
    def separated(self) -> bool:
        """Whether the paired interval excludes zero."""
        c = self.paired.comparison
        return c.ci_lo > 0 or c.ci_hi < 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.paired.to_dict(), "seeds_won": self.seeds_won, "seeds": self.seeds,
                "needed": self.needed, "left_out": self.left_out}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairedVerdict:
        return cls(StudyPaired.from_dict(d), int(d["seeds_won"]), int(d["seeds"]), d["needed"],
                   int(d.get("left_out", 0)))


def paired_verdict(paired: StudyPaired, margin: float, left_out: int = 0) -> PairedVerdict:
    """`paired` with its seeds won and the questions a difference of the observed size (at least
    `margin`, score units) needs at 80% power, given the spread of the per-question differences."""
    c = paired.comparison
    won = sum(a > b for a, b, _ in paired.seed_mcnemar.values())
    sd = c.se * np.sqrt(c.n) if np.isfinite(c.se) else 0.0  # the sd of the per-question differences
    needed = questions_needed(max(abs(c.difference), margin), float(sd))
    return PairedVerdict(paired, won, len(paired.seed_mcnemar), needed, left_out)


def seed_pairs(method: Mapping[Any, Sequence[dict]], baseline: Mapping[Any, Sequence[dict]],
               metric: str) -> tuple[Pairs, dict[str, int]]:
    """(pairs by environment and question id, {environment: undecided (seed, question) pairs});
    questions the baseline's same seed lacks are not paired."""
    pairs: Pairs = {}
    undecided: dict[str, int] = {}
    for seed, rows in method.items():
        base = {r["id"]: r for r in baseline.get(seed, [])}
        for row in rows:
            other = base.get(row["id"])
            if other is None:
                continue
            a, b = row["scores"].get(metric), other["scores"].get(metric)
            if a is None or b is None:
                undecided[row["env"]] = undecided.get(row["env"], 0) + 1
                continue
            pairs.setdefault(row["env"], {}).setdefault(row["id"], []).append((str(seed), float(a), float(b)))
    return pairs, undecided


def _compare_group(by_id: Mapping[str, list[tuple[str, float, float]]], undecided: int, *,
                   power_delta: float, n_boot: int, cluster: Callable[[str], str] | None = None) -> StudyPaired:
    ids = sorted(by_id)
    clusters = [cluster(i.rpartition("\x00")[2]) for i in ids] if cluster is not None else None
    a = [float(np.mean([x for _, x, _ in by_id[i]])) for i in ids]
    b = [float(np.mean([y for _, _, y in by_id[i]])) for i in ids]
    seeds = sorted({s for entries in by_id.values() for s, _, _ in entries})
    per_seed = {s: mcnemar_exact([x == 1 for e in by_id.values() for t, x, _ in e if t == s],
                                 [y == 1 for e in by_id.values() for t, _, y in e if t == s])
                for s in seeds}
    comparison = compare_paired(a, b, clusters=clusters, power_delta=power_delta, n_boot=n_boot)
    return StudyPaired(comparison, per_seed, undecided)


def is_correctness(rows: Mapping[str, Mapping[Any, Sequence[dict]]], metric: str) -> bool:
    """Whether some row scores `metric` and every score of it is 0 or 1."""
    values = [r["scores"].get(metric) for by_seed in rows.values() for rs in by_seed.values() for r in rs]
    scored = [v for v in values if v is not None]
    return bool(scored) and all(v in (0, 1) for v in scored)


def study_paired(rows: Mapping[str, Mapping[Any, Sequence[dict]]], baseline: str, *,
                 power_delta: float = 0.05, n_boot: int = 2000, metrics: Sequence[str] = CORRECTNESS_METRICS,
                 cluster: Callable[[str], str] | None = None) -> dict[str, dict[str, dict[str, StudyPaired]]]:
    """{method: {metric: {environment (sorted), then ALL: StudyPaired}}} of every method but the
    baseline, for those of `metrics` that the rows carry as 0/1 scores (see the module
    docstring); `cluster` maps a question id to its cluster (questions resampled together and
    clustered standard errors; None: each question its own)."""
    metrics = [m for m in metrics if is_correctness(rows, m)]
    out: dict[str, dict[str, dict[str, StudyPaired]]] = {}
    for label, seed_rows in rows.items():
        if label == baseline:
            continue
        out[label] = {}
        for metric in metrics:
            pairs, undecided = seed_pairs(seed_rows, rows[baseline], metric)
            if not pairs:
                continue
            groups = {env: pairs[env] for env in sorted(pairs)}
            groups[ALL] = {f"{env}\x00{i}": v for env, by_id in pairs.items() for i, v in by_id.items()}
            out[label][metric] = {
                g: _compare_group(by_id, undecided.get(g, 0) if g != ALL else sum(undecided.values()),
                                  power_delta=power_delta, n_boot=n_boot, cluster=cluster)
                for g, by_id in groups.items()}
    return out
