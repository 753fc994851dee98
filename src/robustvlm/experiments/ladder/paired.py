"""The invariance ladder's verdicts on the test set's own noise: each method against ERM on the
same test pictures, pooled over seeds (`analysis.study_paired.paired_verdict`: per picture the
method's and ERM's correctness averaged over the seeds both finished, the paired bootstrap
interval over pictures, each seed's exact McNemar test), beside the across-seed count, and the
pictures a margin of the observed size (at least MIN_MARGIN) needs at 80% power.

Every seed scores the same pictures, so the seeds' agreement says nothing about the pictures'
sampling error: a margin of 1 point on 500 pictures is 5 pictures.

Input: the demo's runs ({"source", "rung", "method", "seed", "envs", "diverged", "evaluations":
[{"step", "acc", "val", "correct": {test env: bits}}]}), "bits" one character per picture of
the environment in its order, "1" where the run's answer was right (`to_bits`). A run without
per-picture answers (kept from before they were recorded) is left out and counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robustvlm.analysis.study_paired import PairedVerdict, paired_verdict, study_paired
from robustvlm.experiments.ladder.readings import (
    COLOUR_FREE,
    MIN_MARGIN,
    ORACLE,
    REVERSED,
    reading_evaluations,
)

BASELINE = "erm"
METRIC = "correct"


def to_bits(correct: np.ndarray) -> str:
    """[n] bool as n characters, "1" where right."""
    return "".join("1" if c else "0" for c in np.asarray(correct, dtype=bool))


def from_bits(bits: str) -> np.ndarray:
    """The [n] bool array `to_bits` wrote."""
    return np.frombuffer(bits.encode("ascii"), dtype=np.uint8) == ord("1")


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


def ladder_paired(runs: Sequence[Mapping[str, Any]], train_envs: Sequence[str], reading: str, *,
                  envs: Sequence[str] = (COLOUR_FREE, REVERSED),
                  n_boot: int = 2000) -> dict[str, dict[str, dict[str, PairedVerdict]]]:
    """{"source/rung": {method: {env: PairedVerdict}}} of every method but ERM and the oracle
    against ERM under `reading` (`experiments.ladder.readings.READINGS`) on `envs`, pooled over seeds (module
    doc); rungs where ERM has no per-picture answers are absent."""
    rows, left_out = _rows(runs, reading, train_envs, envs)
    out: dict[str, dict[str, dict[str, PairedVerdict]]] = {}
    for cell, methods in rows.items():
        if BASELINE not in methods:
            continue
        compared = {m: r for m, r in methods.items() if m != ORACLE}
        found = study_paired(compared, BASELINE, metrics=(METRIC,), n_boot=n_boot)
        out[cell] = {method: {env: paired_verdict(groups[METRIC][env], MIN_MARGIN, left_out.get(cell, 0))
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
