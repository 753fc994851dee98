"""Readings and summaries of the invariance ladder's runs (`workflows.demos.ladder`).

A run is {"source", "rung", "method", "seed", "diverged", "evaluations": [{"step", "acc": {env:
accuracy}, "val": {training env: held-out accuracy}}, ...]}; accuracies are 0-1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robustvlm.analysis.selection import nearest_rule
from robustvlm.analysis.verdict import Comparison, compare_all

ORACLE = "oracle"  # the grayscale oracle's method name
COLOUR_FREE = "test-nocolour"
REVERSED = "test-reversed"
READINGS = ("final", "training-domain", "oracle")
ENV_WORDS = {COLOUR_FREE: "colour-free", REVERSED: "reversed"}
MIN_MARGIN = 0.01  # a win over ERM is at least one point, whatever the seeds' spread
VLM = "vlm:"  # the prefix of the VLM rungs (`workflows.demos.ladder_vlm`)


def is_vlm_cell(cell: str) -> bool:
    """Whether a summary cell "source/rung" is a VLM rung's."""
    return cell.partition("/")[2].startswith(VLM)


def readings(run: Mapping[str, Any], train_envs: Sequence[str], test_envs: Sequence[str]) -> dict[str, dict[str, float]]:
    """The three readings of a run: {"final" | "training-domain" | "oracle": {env: accuracy}}:
    the last evaluation; the one with the best mean held-out accuracy of the training
    environments (the first such); and, per test environment, the best accuracy on it."""
    evals = run["evaluations"]
    chosen = max(evals, key=lambda e: np.mean([e["val"][n] for n in train_envs]))["acc"]
    oracle = {n: max(e["acc"][n] for e in evals) for n in test_envs}
    return {"final": dict(evals[-1]["acc"]), "training-domain": dict(chosen), "oracle": oracle}


def summarize(
    runs: Sequence[Mapping[str, Any]],
    train_envs: Sequence[str],
    test_envs: Sequence[str],
    prototypes: Mapping[str, Mapping[str, float]],
) -> dict[str, Any]:
    """{"source/rung": {method: entry}}, entry = {"n_seeds", "n_diverged", reading: {env: {"mean",
    "std", "n"}}, "worst": the worst environment's final accuracy, "rule": the rule of
    `prototypes` nearest to the seed-mean final accuracies}; sds over seeds with ddof 0; a
    diverged run counts in n_diverged only."""
    grouped: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for run in runs:
        grouped.setdefault(f"{run['source']}/{run['rung']}", {}).setdefault(run["method"], []).append(run)
    summary: dict[str, Any] = {}
    for cell, methods in grouped.items():
        summary[cell] = {}
        for method, group in methods.items():
            finished = [readings(r, train_envs, test_envs) for r in group if not r["diverged"]]
            seeds = [r["seed"] for r in group if not r["diverged"]]
            entry: dict[str, Any] = {"n_seeds": len(group), "n_diverged": len(group) - len(finished)}
            for reading in READINGS:
                envs = finished[0][reading] if finished else {}
                entry[reading] = {env: stats([f[reading][env] for f in finished], seeds) for env in envs}
            entry["worst"] = stats([min(f["final"].values()) for f in finished], seeds)
            if finished:
                entry["rule"] = nearest_rule({env: v["mean"] for env, v in entry["final"].items()}, prototypes).rule
            summary[cell][method] = entry
    return summary


def stats(values: Sequence[float], seeds: Sequence[int] = ()) -> dict[str, Any]:
    """{"mean", "std" (ddof 0), "n", "values": {seed: value}} of per-seed values (seeds 0, 1, ...
    unless given; None, None, 0 and {} for none)."""
    if not values:
        return {"mean": None, "std": None, "n": 0, "values": {}}
    labels = [str(s) for s in (seeds or range(len(values)))]
    return {"mean": float(np.mean(values)), "std": float(np.std(values)), "n": len(values),
            "values": dict(zip(labels, map(float, values)))}


def ladder_comparisons(summary: Mapping[str, Any], reading: str, envs: Sequence[str] = (COLOUR_FREE, REVERSED)) -> list[Comparison]:
    """Every invariant method against ERM under `reading`, per rung and environment of `envs`, from the
    per-seed accuracies, with `beats_erm`'s rule (sd ddof 0, margin MIN_MARGIN); settings "rung env"
    (e.g. "fashion/pixels colour-free")."""
    scores: dict[str, dict[str, dict[str, float]]] = {}
    for cell, methods in summary.items():
        for method, entry in methods.items():
            for env in envs:
                values = entry.get(reading, {}).get(env, {}).get("values")
                if values:
                    scores.setdefault(method, {})[f"{cell} {ENV_WORDS.get(env, env)}"] = values
    if "erm" not in scores:
        return []
    return compare_all(scores, "erm", skip=[ORACLE], margin=MIN_MARGIN, ddof=0)


def beats_erm(summary: Mapping[str, Any], cell: str, method: str, reading: str, env: str = COLOUR_FREE) -> bool:
    """Whether `method` beats ERM on `env` under `reading` by more than the seeds' spread (the
    larger of the two sds) and by at least MIN_MARGIN; never from one seed on either side, whose
    spread is unknown (as `analysis.verdict.compare`)."""
    ours = summary[cell].get(method, {}).get(reading, {}).get(env)
    erm = summary[cell].get("erm", {}).get(reading, {}).get(env)
    if not ours or not erm or ours["mean"] is None or erm["mean"] is None or min(ours["n"], erm["n"]) < 2:
        return False
    return ours["mean"] - erm["mean"] > max(ours["std"], erm["std"], MIN_MARGIN)
