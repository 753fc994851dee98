"""Readings and summaries of the invariance ladder's runs (`experiments.ladder.run`).

A run is {"source", "rung", "method", "seed", "diverged", "evaluations": [{"step", "acc": {env:
accuracy}, "val": {training env: held-out accuracy}}, ...]}; accuracies are 0-1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robustvlm.analysis.selection import READINGS, nearest_rule
from robustvlm.analysis.verdict import Comparison, compare_all
from robustvlm.experiments.ladder.rung import VLM, parse_cell

ORACLE = "oracle"  # the grayscale oracle's method name
COLOUR_FREE = "test-nocolour"
REVERSED = "test-reversed"
ENV_WORDS = {COLOUR_FREE: "colour-free", REVERSED: "reversed"}
MIN_MARGIN = 0.01  # a win over ERM is at least one point, whatever the seeds' spread


def is_vlm_cell(cell: str) -> bool:
    """Whether a summary cell "source/rung id" (read back from results.json) is a VLM rung's."""
    return parse_cell(cell)[1].kind == VLM


def reading_evaluations(run: Mapping[str, Any], train_envs: Sequence[str],
                        test_envs: Sequence[str]) -> dict[str, dict[str, int]]:
    """Which evaluation (its index in the run's list) each reading takes per environment:
    {"final" | "training-domain": {every env: index}, "oracle": {test env: index}}: the last
    evaluation; the one with the best mean held-out accuracy of the training environments (the
    first such); and, per test environment, the (first) one with the best accuracy on it."""
    evals = run["evaluations"]
    envs = list(evals[-1]["acc"])
    chosen = max(range(len(evals)), key=lambda i: np.mean([evals[i]["val"][n] for n in train_envs]))
    oracle = {n: max(range(len(evals)), key=lambda i: evals[i]["acc"][n]) for n in test_envs}
    return {"final": dict.fromkeys(envs, len(evals) - 1), "training-domain": dict.fromkeys(envs, chosen),
            "oracle": oracle}


def readings(run: Mapping[str, Any], train_envs: Sequence[str], test_envs: Sequence[str]) -> dict[str, dict[str, float]]:
    """The three readings of a run: {"final" | "training-domain" | "oracle": {env: accuracy}}, at
    the evaluations `reading_evaluations` picks."""
    evals = run["evaluations"]
    return {reading: {env: evals[i]["acc"][env] for env, i in picked.items()}
            for reading, picked in reading_evaluations(run, train_envs, test_envs).items()}


@dataclass(frozen=True)
class Stats:
    """Per-seed values of one accuracy (0-1): their mean, sd (ddof 0), count, and {seed: value};
    None, None, 0 and {} when nothing was measured."""

    mean: float | None
    std: float | None
    n: int
    values: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "n": self.n, "values": self.values}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Stats:
        return cls(d["mean"], d["std"], int(d["n"]), {str(k): float(v) for k, v in d.get("values", {}).items()})


@dataclass(frozen=True)
class MethodSummary:
    """One method on one rung over its seeds: `readings[reading][env]` (`READINGS`), the worst
    environment's final accuracy, and the rule of the prototypes nearest to the seed-mean final
    accuracies (None when every run diverged); a diverged run counts in `n_diverged` only."""

    n_seeds: int
    n_diverged: int
    readings: dict[str, dict[str, Stats]]
    worst: Stats
    rule: str | None = None

    @property
    def final(self) -> dict[str, Stats]:
        return self.readings["final"]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"n_seeds": self.n_seeds, "n_diverged": self.n_diverged,
                             **{r: {env: s.to_dict() for env, s in self.readings[r].items()} for r in READINGS},
                             "worst": self.worst.to_dict()}
        if self.rule is not None:
            d["rule"] = self.rule
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MethodSummary:
        return cls(int(d["n_seeds"]), int(d["n_diverged"]),
                   {r: {env: Stats.from_dict(s) for env, s in d[r].items()} for r in READINGS},
                   Stats.from_dict(d["worst"]), d.get("rule"))


Summary = dict[str, dict[str, MethodSummary]]
"""{"source/rung": {method: its summary}}."""


def summary_to_dict(summary: Summary) -> dict[str, Any]:
    """A summary as results.json holds it (read back by `summary_from_dict`)."""
    return {cell: {method: e.to_dict() for method, e in entries.items()} for cell, entries in summary.items()}


def summary_from_dict(d: Mapping[str, Any]) -> Summary:
    return {cell: {method: MethodSummary.from_dict(e) for method, e in entries.items()} for cell, entries in d.items()}


def summarize(
    runs: Sequence[Mapping[str, Any]],
    train_envs: Sequence[str],
    test_envs: Sequence[str],
    prototypes: Mapping[str, Mapping[str, float]],
) -> Summary:
    """Each (source/rung, method)'s `MethodSummary` over its runs; `rule`: the rule of
    `prototypes` nearest to the seed-mean final accuracies."""
    grouped: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for run in runs:
        grouped.setdefault(f"{run['source']}/{run['rung']}", {}).setdefault(run["method"], []).append(run)
    summary: Summary = {}
    for cell, methods in grouped.items():
        summary[cell] = {}
        for method, group in methods.items():
            finished = [readings(r, train_envs, test_envs) for r in group if not r["diverged"]]
            seeds = [r["seed"] for r in group if not r["diverged"]]
            by_reading = {reading: {env: stats([f[reading][env] for f in finished], seeds)
                                    for env in (finished[0][reading] if finished else {})} for reading in READINGS}
            rule = (nearest_rule({env: v.mean for env, v in by_reading["final"].items() if v.mean is not None},
                                 prototypes).rule if finished else None)
            summary[cell][method] = MethodSummary(len(group), len(group) - len(finished), by_reading,
                                                  stats([min(f["final"].values()) for f in finished], seeds), rule)
    return summary


def stats(values: Sequence[float], seeds: Sequence[int] = ()) -> Stats:
    """The `Stats` of per-seed values (seeds 0, 1, ... unless given)."""
    if not values:
        return Stats(None, None, 0, {})
    labels = [str(s) for s in (seeds or range(len(values)))]
    return Stats(float(np.mean(values)), float(np.std(values)), len(values), dict(zip(labels, map(float, values))))


def ladder_comparisons(summary: Summary, reading: str, envs: Sequence[str] = (COLOUR_FREE, REVERSED)) -> list[Comparison]:
    """Every invariant method against ERM under `reading`, per rung and environment of `envs`, from the
    per-seed accuracies, with `beats_erm`'s rule (sd ddof 0, margin MIN_MARGIN); settings "rung env"
    (e.g. "fashion/pixels colour-free")."""
    scores: dict[str, dict[str, dict[str, float]]] = {}
    for cell, methods in summary.items():
        for method, entry in methods.items():
            for env in envs:
                found = entry.readings.get(reading, {}).get(env)
                if found and found.values:
                    values = found.values
                    scores.setdefault(method, {})[f"{cell} {ENV_WORDS.get(env, env)}"] = values
    if "erm" not in scores:
        return []
    return compare_all(scores, "erm", skip=[ORACLE], margin=MIN_MARGIN, ddof=0)


def beats_erm(summary: Summary, cell: str, method: str, reading: str, env: str = COLOUR_FREE) -> bool:
    """Whether `method` beats ERM on `env` under `reading` by more than the seeds' spread (the
    larger of the two sds) and by at least MIN_MARGIN; never from one seed on either side, whose
    spread is unknown (as `analysis.verdict.compare`)."""
    ours, erm = (summary[cell][m].readings.get(reading, {}).get(env) if m in summary[cell] else None
                 for m in (method, "erm"))
    if not ours or not erm or ours.mean is None or erm.mean is None or min(ours.n, erm.n) < 2:
        return False
    return ours.mean - erm.mean > max(ours.std or 0.0, erm.std or 0.0, MIN_MARGIN)
