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

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import product

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


@dataclass(frozen=True)
class CellScores:
    """One cell of one model: (label, seed, training env, test env) and what each output of
    `aggregate_matrix` reduces over seeds.

    Attributes:
        accuracy: pairwise accuracy in the run's own view.
        balanced_accuracy: on the diagonal, accuracy on the length-balanced subset (None
            off the diagonal or when the subset holds none of the run's pairs).
        text_only: on the diagonal of a run scored without the image too: (its view, the
            text-only view, accuracy in the text-only view).
        proxied: an o.o.d. cell with a text-only model of the same seed and training env, whose
            SFD and reward-difference correlation (None where undefined) follow.
    """

    label: str
    seed: int
    train_env: str
    test_env: str
    accuracy: float
    balanced_accuracy: float | None = None
    text_only: tuple[str, str, float] | None = None
    proxied: bool = False
    sfd: float | None = None
    correlation: float | None = None

    @property
    def key(self) -> str:
        return cell_key(self.train_env, self.test_env)


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
    test_envs = sorted({env for env, _, _ in texts.values()})
    seeds = sorted({r.seed for r in runs})
    out = MatrixResults(labels, proxy_label, sorted({r.train_env for r in runs}), test_envs, seeds)
    balanced_ids: dict[str, set[str]] = {}
    for env in test_envs:
        out.lengths[env], balanced_ids[env] = _length_shares(texts, env, seed)
    env_of = {pid: env for pid, (env, _, _) in texts.items()}
    records = list(matrix_cells(runs, env_of, balanced_ids, proxy_label))
    for label in labels:
        cells = [c for c in records if c.label == label]
        out.cells[label] = _spread_by(cells, lambda c: c.key, lambda c: c.accuracy)
        out.averages[label] = _averages(cells, seeds)
        if label != proxy_label and proxy_label is not None:
            proxied = [c for c in cells if c.proxied]
            out.sfd[label] = _spread_by(proxied, lambda c: c.key, lambda c: c.sfd)
            out.sfd_average[label], out.sfd_cells[label] = _sfd_summary(proxied, seeds)
            out.correlation[label] = _spread_by(proxied, lambda c: c.key, lambda c: c.correlation)
        out.text_only_test[label] = _text_only_test(cells)
        out.length_balanced[label] = _spread_by(cells, lambda c: c.test_env, lambda c: c.balanced_accuracy)
    return out


def _length_shares(
    texts: Mapping[str, tuple[str, str, str]], env: str, seed: int
) -> tuple[dict[str, float], set[str]]:
    """(`lengths[env]`: length shares and the balanced subset's size, the subset's pair ids)."""
    ids = [pid for pid, (e, _, _) in texts.items() if e == env]
    chosen, rejected = [texts[i][1] for i in ids], [texts[i][2] for i in ids]
    balanced = {ids[i] for i in length_balanced_subset(chosen, rejected, seed=seed)}
    return {**length_shares(chosen, rejected), "balanced_pairs": len(balanced)}, balanced


def matrix_cells(
    runs: Sequence[MatrixRun],
    env_of: Mapping[str, str],
    balanced_ids: Mapping[str, set[str]],
    proxy_label: str | None,
) -> Iterator[CellScores]:
    """One `CellScores` per (label, seed, training env, test env) with test pairs, in that order
    (labels as first given, the rest sorted); `balanced_ids`: {test env: the pair ids of its
    length-balanced subset} for every test env."""
    by_key = {(r.label, r.seed, r.train_env): r for r in runs}
    labels = list(dict.fromkeys(r.label for r in runs))
    seeds, train_envs = sorted({r.seed for r in runs}), sorted({r.train_env for r in runs})
    test_envs = sorted(balanced_ids)
    for label, s, train in product(labels, seeds, train_envs):
        run = by_key.get((label, s, train))
        if run is None:
            continue
        proxy = by_key.get((proxy_label, s, train)) if proxy_label and label != proxy_label else None
        correct = run.correct()
        for test in test_envs:
            ids = [pid for pid in correct if env_of.get(pid) == test]
            if not ids:
                continue
            cell = CellScores(label, s, train, test, _accuracy(correct, ids))
            if train == test:
                yield _diagonal(cell, run, ids, correct, balanced_ids[test])
            else:
                yield cell if proxy is None else _against_proxy(cell, run, proxy, ids)


def _accuracy(correct: Mapping[str, bool], ids: Sequence[str]) -> float:
    return float(np.mean([correct[i] for i in ids]))


def _diagonal(
    cell: CellScores, run: MatrixRun, ids: list[str], correct: Mapping[str, bool], balanced: set[str]
) -> CellScores:
    """An i.i.d. cell with its length-balanced and text-only accuracies."""
    kept = [i for i in ids if i in balanced]
    text_only = None
    if run.text_view is not None:
        text_only = (run.view, run.text_view, _accuracy(run.correct(run.text_view), ids))
    return replace(cell, balanced_accuracy=_accuracy(correct, kept) if kept else None, text_only=text_only)


def _against_proxy(cell: CellScores, run: MatrixRun, proxy: MatrixRun, ids: list[str]) -> CellScores:
    """An o.o.d. cell with its SFD and reward-difference correlation against the text-only model."""
    correct, proxy_correct = run.correct(), proxy.correct()
    gaps, proxy_gaps = run.gaps(), proxy.gaps()
    return replace(
        cell,
        proxied=True,
        sfd=shortcut_failure_degradation([correct[i] for i in ids], [proxy_correct[i] for i in ids]).sfd,
        correlation=correlation([gaps[i] for i in ids], [proxy_gaps[i] for i in ids]),
    )


def _spread_by(
    cells: Sequence[CellScores], group: Callable[[CellScores], str], value: Callable[[CellScores], float | None]
) -> dict[str, dict]:
    """{group of a cell ("train->test", a test env): seed spread of `value`} over the cells where
    it is defined."""
    found: dict[str, list[float]] = {}
    for cell in cells:
        if (v := value(cell)) is not None:
            found.setdefault(group(cell), []).append(v)
    return {key: seed_spread(values) for key, values in found.items()}


def _averages(cells: Sequence[CellScores], seeds: Sequence[int]) -> dict[str, dict | None]:
    """{"iid", "ood"}: the diagonal and off-diagonal means, per seed, spread over seeds."""
    iid, ood = [], []
    for s in seeds:
        averages = matrix_averages({(c.train_env, c.test_env): c.accuracy for c in cells if c.seed == s})
        if averages["iid"] is not None:
            iid.append(averages["iid"])
        if averages["ood"] is not None:
            ood.append(averages["ood"])
    return {"iid": _spread(iid), "ood": _spread(ood)}


def _sfd_summary(proxied: Sequence[CellScores], seeds: Sequence[int]) -> tuple[dict | None, dict[str, list[int]]]:
    """(`sfd_average`: the spread of each seed's mean SFD over the o.o.d. cells where it is
    defined, `sfd_cells`: per seed, how many cells that mean covers and how many were scored)."""
    means, defined, scored = [], [], []
    for s in seeds:
        values = [c.sfd for c in proxied if c.seed == s and c.sfd is not None]
        if values:
            means.append(float(np.mean(values)))
        defined.append(len(values))
        scored.append(sum(c.seed == s for c in proxied))
    return _spread(means), {"defined": defined, "cells": scored}


def _text_only_test(cells: Sequence[CellScores]) -> dict[str, dict[str, dict]]:
    """{env: {view: seed spread}}: diagonal accuracy with and without the image."""
    found: dict[str, dict[str, list[float]]] = {}
    for cell in cells:
        if cell.text_only is not None:
            view, text_view, without = cell.text_only
            entry = found.setdefault(cell.test_env, {view: [], text_view: []})
            entry[view].append(cell.accuracy)
            entry[text_view].append(without)
    return {env: {view: seed_spread(x) for view, x in by_view.items()} for env, by_view in found.items()}


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
