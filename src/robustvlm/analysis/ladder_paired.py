"""The invariance ladder's verdicts on the test set's own noise: each method against ERM on the
same test pictures, pooled over seeds (`analysis.study_paired`: per picture the method's and
ERM's correctness averaged over the seeds both finished, the paired bootstrap interval over
pictures, each seed's exact McNemar test), beside the across-seed count, and the pictures a
margin of the observed size needs at 80% power (`analysis.paired.questions_needed`).

Every seed scores the same pictures, so the seeds' agreement says nothing about the pictures'
sampling error: a margin of 1 point on 500 pictures is 5 pictures.

Input: the demo's runs ({"source", "rung", "method", "seed", "envs", "diverged", "evaluations":
[{"step", "acc", "val", "correct": {test env: bits}}]}), "bits" one character per picture of
the environment in its order, "1" where the run's answer was right (`to_bits`). A run without
per-picture answers (kept from before they were recorded) is left out and counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robustvlm.analysis.ladder import COLOUR_FREE, MIN_MARGIN, ORACLE, REVERSED, reading_evaluations
from robustvlm.analysis.paired import questions_needed
from robustvlm.analysis.study_paired import StudyPaired, study_paired

BASELINE = "erm"
METRIC = "correct"
CONFIDENCE = 0.95  # the paired bootstrap's interval (`analysis.paired.compare_paired`'s default)


def to_bits(correct: np.ndarray) -> str:
    """[n] bool as n characters, "1" where right."""
    return "".join("1" if c else "0" for c in np.asarray(correct, dtype=bool))


def from_bits(bits: str) -> np.ndarray:
    """The [n] bool array `to_bits` wrote."""
    return np.frombuffer(bits.encode("ascii"), dtype=np.uint8) == ord("1")


@dataclass(frozen=True)
class PairedVerdict:
    """A method against ERM on one test environment of one rung under one reading.

    Attributes:
        paired: the comparison pooled over seeds (difference in 0-1 units; its interval, the
            per-seed McNemar counts and p-values).
        seeds_won, seeds: seeds (shared by both) where the method answered more pictures right.
        pictures_needed: pictures (with these seeds) a difference of the observed size, at
            least MIN_MARGIN, needs at 80% power; None when the paired differences have no
            spread.
        left_out: runs of either method without per-picture answers.
    """

    paired: StudyPaired
    seeds_won: int
    seeds: int
    pictures_needed: float | None
    left_out: int = 0

    @property
    def separated(self) -> bool:
        """Whether the paired interval excludes zero."""
        c = self.paired.comparison
        return c.ci_lo > 0 or c.ci_hi < 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.paired.to_dict(), "seeds_won": self.seeds_won, "seeds": self.seeds,
                "pictures_needed": self.pictures_needed, "left_out": self.left_out}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairedVerdict:
        return cls(StudyPaired.from_dict(d), int(d["seeds_won"]), int(d["seeds"]), d["pictures_needed"],
                   int(d.get("left_out", 0)))


#: {reading: {"source/rung": {method: {test env: PairedVerdict}}}}
LadderPaired = dict[str, dict[str, dict[str, dict[str, PairedVerdict]]]]


def _rows(runs: Sequence[Mapping[str, Any]], reading: str, train_envs: Sequence[str],
          envs: Sequence[str]) -> tuple[dict[str, dict[str, dict[str, list[dict]]]], dict[str, int]]:
    """({cell: {method: {seed: study rows}}}, {cell: runs left out}) of the finished runs."""
    rows: dict[str, dict[str, dict[str, list[dict]]]] = {}
    left_out: dict[str, int] = {}
    for run in runs:
        cell = f"{run['source']}/{run['rung']}"
        if run["diverged"]:
            continue
        if any("correct" not in e for e in run["evaluations"]):
            left_out[cell] = left_out.get(cell, 0) + 1
            continue
        picked = reading_evaluations(run, train_envs, envs)[reading]
        seed_rows = rows.setdefault(cell, {}).setdefault(run["method"], {}).setdefault(str(run["seed"]), [])
        for env in envs:
            bits = run["evaluations"][picked[env]]["correct"][env]
            seed_rows += [{"id": f"{env}/{i}", "env": env, "scores": {METRIC: int(c)}} for i, c in enumerate(from_bits(bits))]
    return rows, left_out


def _verdict(paired: StudyPaired, left_out: int) -> PairedVerdict:
    c = paired.comparison
    won = sum(a > b for a, b, _ in paired.seed_mcnemar.values())
    sd = c.se * np.sqrt(c.n) if np.isfinite(c.se) else 0.0  # the sd of the per-picture differences
    needed = questions_needed(max(abs(c.difference), MIN_MARGIN), float(sd))
    return PairedVerdict(paired, won, len(paired.seed_mcnemar), needed, left_out)


def ladder_paired(runs: Sequence[Mapping[str, Any]], train_envs: Sequence[str], reading: str, *,
                  envs: Sequence[str] = (COLOUR_FREE, REVERSED),
                  n_boot: int = 2000) -> dict[str, dict[str, dict[str, PairedVerdict]]]:
    """{"source/rung": {method: {env: PairedVerdict}}} of every method but ERM and the oracle
    against ERM under `reading` (`analysis.ladder.READINGS`) on `envs`, pooled over seeds (module
    doc); rungs where ERM has no per-picture answers are absent."""
    rows, left_out = _rows(runs, reading, train_envs, envs)
    out: dict[str, dict[str, dict[str, PairedVerdict]]] = {}
    for cell, methods in rows.items():
        if BASELINE not in methods:
            continue
        compared = {m: r for m, r in methods.items() if m != ORACLE}
        found = study_paired(compared, BASELINE, metrics=(METRIC,), n_boot=n_boot)
        out[cell] = {method: {env: _verdict(groups[METRIC][env], left_out.get(cell, 0))
                              for env in envs if env in groups.get(METRIC, {})}
                     for method, groups in found.items()}
    return out


def paired_to_dict(paired: LadderPaired) -> dict[str, Any]:
    """`LadderPaired` as results.json holds it (read back by `paired_from_dict`)."""
    return {reading: {cell: {m: {env: v.to_dict() for env, v in by_env.items()} for m, by_env in methods.items()}
                      for cell, methods in cells.items()} for reading, cells in paired.items()}


def paired_from_dict(d: Mapping[str, Any]) -> LadderPaired:
    return {reading: {cell: {m: {env: PairedVerdict.from_dict(v) for env, v in by_env.items()}
                             for m, by_env in methods.items()} for cell, methods in cells.items()}
            for reading, cells in d.items()}
