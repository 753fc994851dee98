"""Generalization matrices of reward models: train on each environment, test on every one.

Input: one `MatrixRun` per (loss label, seed, training environment), holding the run's scored
test pairs. Output (`MatrixResults`), each quantity as mean / std / min / max over seeds:

- `cells[label]["train->test"]`: pairwise accuracy in the run's own view;
- `averages[label]`: the i.i.d. (diagonal) and o.o.d. (off-diagonal) means, computed per seed,
  then spread over seeds (the paper's Figure 1);
- `sfd[label]["train->test"]` per o.o.d. cell: shortcut-failure degradation of the label's model,
  the pairs split by whether the text-only model of the same seed and training environment gets
  them right; `sfd_average[label]`: the per-seed mean over o.o.d. cells whose SFD is defined (a
  cell where the text-only model gets every pair right, or none, has none);
  `sfd_cells[label]`: {"defined": per seed, how many o.o.d. cells the mean covers, "cells": per
  seed, how many o.o.d. cells were scored};
- `correlation[label]["train->test"]`: Pearson correlation of the label's reward differences
  (r_chosen - r_rejected) with the text-only model's on the same pairs;
- `text_only_test[label]["env"]`: on the diagonal, accuracy with and without the image;
- `lengths[env]`: shares of test pairs whose chosen response is longer / shorter / as long and
  the size of a length-balanced subset of them (`balanced_pairs`), and
  `length_balanced[label]["env"]`: diagonal accuracy on that subset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from robustvlm.analysis.reward import (
    SwapCheck,
    correlation,
    length_balanced_subset,
    length_shares,
    matrix_averages,
    paired_difference,
    seed_spread,
    shortcut_failure_degradation,
    swap_check,
)
from robustvlm.errors import DataError


def cell_key(train_env: str, test_env: str) -> str:
    """"train->test", the JSON key of a matrix cell."""
    return f"{train_env}->{test_env}"


@dataclass
class MatrixRun:
    """One trained model of the matrix and its scored test pairs.

    Attributes:
        rows: {id, env, <view>: [r_chosen, r_rejected]} per test pair (all test environments).
        view: the view its accuracy is read in (its training view).
        text_view: the view of its text-only test, when scored.
    """

    label: str
    seed: int
    train_env: str
    rows: list[dict]
    view: str
    text_view: str | None = None

    def correct(self, view: str | None = None) -> dict[str, bool]:
        """{pair id: r_chosen > r_rejected} in `view` (default the run's own)."""
        v = view or self.view
        return {r["id"]: r[v][0] > r[v][1] for r in self.rows}

    def gaps(self) -> dict[str, float]:
        """{pair id: r_chosen - r_rejected} in the run's view."""
        return {r["id"]: r[self.view][0] - r[self.view][1] for r in self.rows}


@dataclass
class MatrixResults:
    """See the module doc; spreads are `analysis.reward.seed_spread` dicts."""

    labels: list[str]
    proxy_label: str | None
    train_envs: list[str]
    test_envs: list[str]
    seeds: list[int]
    cells: dict[str, dict[str, dict]] = field(default_factory=dict)
    averages: dict[str, dict[str, dict | None]] = field(default_factory=dict)
    sfd: dict[str, dict[str, dict]] = field(default_factory=dict)
    sfd_average: dict[str, dict | None] = field(default_factory=dict)
    sfd_cells: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    correlation: dict[str, dict[str, dict]] = field(default_factory=dict)
    text_only_test: dict[str, dict[str, dict[str, dict]]] = field(default_factory=dict)
    lengths: dict[str, dict[str, float]] = field(default_factory=dict)
    length_balanced: dict[str, dict[str, dict]] = field(default_factory=dict)
    swap: dict[str, dict] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> MatrixResults:
        return cls(**data)


def _spread(values: list[float]) -> dict | None:
    return seed_spread(values) if values else None


def aggregate_matrix(
    runs: Sequence[MatrixRun],
    texts: Mapping[str, tuple[str, str, str]],
    *,
    proxy_label: str | None,
    seed: int = 0,
) -> MatrixResults:
    """`MatrixResults` of `runs` (see the module doc).

    Args:
        texts: {pair id: (test env, chosen, rejected)} of every test pair.
        proxy_label: the label of the text-only models (SFD and correlations need them).
        seed: seed of the length-balanced subsets.
    """
    if not runs:
        raise DataError("no matrix runs to aggregate")
    labels = list(dict.fromkeys(r.label for r in runs))
    if proxy_label is not None and proxy_label not in labels:
        raise DataError(f"the text-only label {proxy_label!r} has no runs")
    by_key = {(r.label, r.seed, r.train_env): r for r in runs}
    train_envs = sorted({r.train_env for r in runs})
    test_envs = sorted({env for env, _, _ in texts.values()})
    seeds = sorted({r.seed for r in runs})
    env_of = {pid: env for pid, (env, _, _) in texts.items()}
    out = MatrixResults(labels, proxy_label, train_envs, test_envs, seeds)
    balanced_ids: dict[str, set[str]] = {}
    for env in test_envs:
        ids = [pid for pid, (e, _, _) in texts.items() if e == env]
        chosen, rejected = [texts[i][1] for i in ids], [texts[i][2] for i in ids]
        balanced_ids[env] = {ids[i] for i in length_balanced_subset(chosen, rejected, seed=seed)}
        out.lengths[env] = {**length_shares(chosen, rejected), "balanced_pairs": len(balanced_ids[env])}
    for label in labels:
        cells: dict[str, list[float]] = {}
        iid, ood, sfd_mean = [], [], []
        defined_cells, ood_cells = [], []
        sfd: dict[str, list[float]] = {}
        corr: dict[str, list[float]] = {}
        text_test: dict[str, dict[str, list[float]]] = {}
        balanced: dict[str, list[float]] = {}
        for s in seeds:
            per_seed: dict[tuple[str, str], float] = {}
            seed_sfd = []
            scored_ood = 0
            for train in train_envs:
                run = by_key.get((label, s, train))
                if run is None:
                    continue
                correct = run.correct()
                proxy = by_key.get((proxy_label, s, train)) if proxy_label and label != proxy_label else None
                if proxy is not None:
                    proxy_correct, proxy_gaps, gaps = proxy.correct(), proxy.gaps(), run.gaps()
                for test in test_envs:
                    ids = [pid for pid in correct if env_of.get(pid) == test]
                    if not ids:
                        continue
                    key = cell_key(train, test)
                    acc = float(np.mean([correct[i] for i in ids]))
                    per_seed[train, test] = acc
                    cells.setdefault(key, []).append(acc)
                    if train == test:
                        kept = [i for i in ids if i in balanced_ids[test]]
                        if kept:
                            balanced.setdefault(test, []).append(float(np.mean([correct[i] for i in kept])))
                        if run.text_view is not None:
                            without = run.correct(run.text_view)
                            entry = text_test.setdefault(test, {run.view: [], run.text_view: []})
                            entry[run.view].append(acc)
                            entry[run.text_view].append(float(np.mean([without[i] for i in ids])))
                        continue
                    if proxy is None:
                        continue
                    scored_ood += 1
                    degradation = shortcut_failure_degradation([correct[i] for i in ids],
                                                               [proxy_correct[i] for i in ids]).sfd
                    if degradation is not None:
                        sfd.setdefault(key, []).append(degradation)
                        seed_sfd.append(degradation)
                    r = correlation([gaps[i] for i in ids], [proxy_gaps[i] for i in ids])
                    if r is not None:
                        corr.setdefault(key, []).append(r)
            averages = matrix_averages(per_seed)
            if averages["iid"] is not None:
                iid.append(averages["iid"])
            if averages["ood"] is not None:
                ood.append(averages["ood"])
            if seed_sfd:
                sfd_mean.append(float(np.mean(seed_sfd)))
            defined_cells.append(len(seed_sfd))
            ood_cells.append(scored_ood)
        out.cells[label] = {k: seed_spread(v) for k, v in cells.items()}
        out.averages[label] = {"iid": _spread(iid), "ood": _spread(ood)}
        if label != proxy_label and proxy_label is not None:
            out.sfd[label] = {k: seed_spread(v) for k, v in sfd.items()}
            out.sfd_average[label] = _spread(sfd_mean)
            out.sfd_cells[label] = {"defined": defined_cells, "cells": ood_cells}
            out.correlation[label] = {k: seed_spread(v) for k, v in corr.items()}
        out.text_only_test[label] = {e: {v: seed_spread(x) for v, x in d.items()} for e, d in text_test.items()}
        out.length_balanced[label] = {e: seed_spread(v) for e, v in balanced.items()}
    return out


def gap_points(
    runs: Sequence[MatrixRun], env_of: Mapping[str, str], *, label: str, proxy_label: str, seed: int
) -> list[tuple[float, float, str]]:
    """(text-only model's reward difference, `label`'s reward difference, test env) of every
    o.o.d. test pair of `seed`, pooled over training environments (the correlation scatter)."""
    by_key = {(r.label, r.seed, r.train_env): r for r in runs}
    points = []
    for (run_label, run_seed, train), run in by_key.items():
        proxy = by_key.get((proxy_label, seed, train))
        if run_label != label or run_seed != seed or proxy is None:
            continue
        gaps, proxy_gaps = run.gaps(), proxy.gaps()
        points += [(proxy_gaps[i], gaps[i], env_of[i]) for i in gaps if env_of.get(i, train) != train]
    return points


def compare_labels(results: MatrixResults, base: str, other: str) -> dict[str, dict | None]:
    """`other` minus `base`, seed by seed (`analysis.reward.paired_difference`), for the i.i.d.
    and o.o.d. averages and the mean SFD; None where either side lacks the quantity."""
    def paired(a: Mapping | None, b: Mapping | None) -> dict | None:
        return paired_difference(a, b) if a is not None and b is not None else None

    return {
        "iid": paired(results.averages[base]["iid"], results.averages[other]["iid"]),
        "ood": paired(results.averages[base]["ood"], results.averages[other]["ood"]),
        "sfd": paired(results.sfd_average.get(base), results.sfd_average.get(other)),
    }


def matrix_swap_checks(runs: Sequence[MatrixRun]) -> dict[str, dict]:
    """{label: the swap check over its runs}: "runs" checked, mean "swapped_accuracy" and
    "expected" (1 - accuracy - ties), and the largest |swapped - expected| of one run; runs
    scored without the check are left out (a label with none is absent). Raises the DataError
    of `analysis.reward.swap_check` for a run that fails it."""
    checks: dict[str, list[SwapCheck]] = {}
    for run in runs:
        if run.rows and all("swapped" in r for r in run.rows):
            checks.setdefault(run.label, []).append(swap_check(run.rows, run.view))
    return {
        label: {"runs": len(found),
                "swapped_accuracy": float(np.mean([c.swapped_accuracy for c in found])),
                "expected": float(np.mean([c.expected for c in found])),
                "max_abs_difference": max(abs(c.swapped_accuracy - c.expected) for c in found)}
        for label, found in checks.items()
    }
