"""A report's verdict: which method beat the baseline, where, by how much, in how many seeds.

Pure functions on per-seed scores; the report modules render their sentences under `## Verdict`.
A method *beats* the baseline in one setting (an environment, an example, a split) when its mean
over seeds is better than the baseline's by more than the seed spread: the larger of the two
standard deviations over seeds (and by at least `margin`). Below that the difference is *within
the seed spread*; with one seed on either side the spread is unknown and nothing is called;
equal means are a tie. Seeds are paired by their label for the per-seed win count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from robustvlm.analysis.stats import bootstrap_ci
from robustvlm.errors import DataError

Outcome = Literal["better", "worse", "within spread", "tie", "one seed"]
TIE_TOLERANCE = 1e-12
N_BOOT = 2000


@dataclass(frozen=True)
class SeedSpread:
    """One method's score over seeds.

    Attributes:
        values: the per-seed scores, in seed order.
        mean: their mean; sd: their standard deviation (ddof as asked; None for one seed).
        ci: 95% percentile bootstrap interval of the mean, resampling seeds (None for one seed).
    """

    values: tuple[float, ...]
    mean: float
    sd: float | None
    ci: tuple[float, float] | None

    def to_dict(self) -> dict:
        return {"values": list(self.values), "mean": self.mean, "sd": self.sd,
                "seed_ci": list(self.ci) if self.ci else None}


def seed_spread(values: Sequence[float], *, ddof: int = 1, n_boot: int = N_BOOT, seed: int = 0) -> SeedSpread:
    """Mean, sd (`ddof`) and the seed-resampling bootstrap interval of per-seed scores."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise DataError("seed_spread needs at least one per-seed score")
    if arr.size == 1:
        return SeedSpread((float(arr[0]),), float(arr[0]), None, None)
    sd = float(arr.std(ddof=ddof))
    ci = bootstrap_ci(arr, n_boot=n_boot, seed=seed)
    return SeedSpread(tuple(float(v) for v in arr), float(arr.mean()), sd, ci)


@dataclass(frozen=True)
class Comparison:
    """A method against the baseline in one setting (module doc).

    Attributes:
        gain: mean(method) - mean(baseline), signed so that positive is better.
        spread: the larger sd over seeds of the two (None when either has one seed).
        wins, losses: seeds (shared by both) where the method scored better / worse.
        n_seeds: seeds shared by both.
    """

    method: str
    baseline: str
    where: str
    method_mean: float
    baseline_mean: float
    gain: float
    spread: float | None
    wins: int
    losses: int
    n_seeds: int
    outcome: Outcome


def compare(
    method: str,
    baseline: str,
    where: str,
    method_values: Mapping[Any, float],
    baseline_values: Mapping[Any, float],
    *,
    higher_is_better: bool = True,
    margin: float = 0.0,
    ddof: int = 1,
) -> Comparison:
    """Compare per-seed scores {seed: score} of `method` and `baseline` in setting `where`."""
    if not method_values or not baseline_values:
        raise DataError(f"compare {method} with {baseline} on {where}: a side has no scores")
    sign = 1.0 if higher_is_better else -1.0
    ours, base = (np.asarray(list(v.values()), dtype=float) for v in (method_values, baseline_values))
    gain = sign * float(ours.mean() - base.mean())
    shared = [s for s in method_values if s in baseline_values]
    diffs = [sign * (method_values[s] - baseline_values[s]) for s in shared]
    spread = None if min(ours.size, base.size) < 2 else max(float(ours.std(ddof=ddof)), float(base.std(ddof=ddof)))
    outcome: Outcome
    if abs(gain) <= TIE_TOLERANCE:
        outcome = "tie"
    elif spread is None:
        outcome = "one seed"
    elif abs(gain) > max(spread, margin):
        outcome = "better" if gain > 0 else "worse"
    else:
        outcome = "within spread"
    return Comparison(method, baseline, where, float(ours.mean()), float(base.mean()), gain, spread,
                      sum(d > TIE_TOLERANCE for d in diffs), sum(d < -TIE_TOLERANCE for d in diffs),
                      len(shared), outcome)


def compare_all(
    scores: Mapping[str, Mapping[str, Mapping[Any, float]]],
    baseline: str,
    *,
    skip: Sequence[str] = (),
    higher_is_better: bool = True,
    margin: float = 0.0,
    ddof: int = 1,
) -> list[Comparison]:
    """Every method of `scores` {method: {setting: {seed: score}}} but the baseline and `skip`
    against the baseline, in each setting both scored; seeds with a non-finite score (a diverged
    run) are left out, and a setting left with no seed on either side is skipped."""
    def finite(values: Mapping[Any, float]) -> dict[Any, float]:
        return {s: v for s, v in values.items() if np.isfinite(v)}

    base = scores[baseline]
    out = []
    for method, settings in scores.items():
        if method == baseline or method in skip:
            continue
        for where, values in settings.items():
            ours, theirs = finite(values), finite(base.get(where, {}))
            if ours and theirs:
                out.append(compare(method, baseline, where, ours, theirs, higher_is_better=higher_is_better,
                                   margin=margin, ddof=ddof))
    return out


def _detail(c: Comparison, fmt: Callable[[float], str]) -> str:
    spread = "" if c.spread is None else f", seed sd up to {fmt(c.spread)}"
    return (f"{c.where} ({fmt(c.method_mean)} against {fmt(c.baseline_mean)}, {fmt(abs(c.gain))} "
            f"{'better' if c.gain > 0 else 'worse'}{spread}; better in {c.wins} of {c.n_seeds} seeds)")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def verdict_sentences(
    comparisons: Sequence[Comparison],
    *,
    metric: str,
    selection: str,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
    what: str = "setting",
    rule: str = "the larger sd over seeds",
) -> list[str]:
    """The verdict in a few sentences: the rule, then per method where it beat the baseline and
    where it did worse (by how much, in how many seeds), where the difference is within the seed
    spread, and a plain sentence when nothing beat the baseline.

    Args:
        comparisons: every (method, setting) against one baseline.
        metric: what was compared, with its direction (e.g. "colour-free accuracy, higher is better").
        selection: the model selection the scores come from (e.g. "the final step").
        fmt: how a score is written.
        what: the kind of setting (e.g. "environment").
        rule: what the seed spread is, as the first sentence states it.
    """
    if not comparisons:
        return ["No method was compared with a baseline: nothing to conclude."]
    baseline = comparisons[0].baseline
    lines = [conclusion(comparisons, what=what)]
    lines += [f"Compared with {baseline} on {metric}, models chosen by {selection}; a method beats {baseline} "
             f"where its mean over seeds is better by more than the seed spread ({rule})."]
    methods = list(dict.fromkeys(c.method for c in comparisons))
    for method in methods:
        mine = [c for c in comparisons if c.method == method]
        parts = []
        for outcome, verb in (("better", "beat"), ("worse", "did worse than")):
            hits = [_detail(c, fmt) for c in mine if c.outcome == outcome]
            if hits:
                parts.append(f"{verb} {baseline} on {_join(hits)}")
        rest = [c.where for c in mine if c.outcome == "within spread"]
        if rest:
            parts.append(f"is within the seed spread of {baseline} on {_join(rest)}")
        ties = [c.where for c in mine if c.outcome == "tie"]
        if ties:
            parts.append(f"ties {baseline} on {_join(ties)}")
        single = [c for c in mine if c.outcome == "one seed"]
        if single:
            shown = [f"{c.where} ({fmt(c.method_mean)} against {fmt(c.baseline_mean)})" for c in single]
            parts.append(f"has one seed on {_join(shown)}, so no spread and no call")
        lines.append(f"{method} " + "; ".join(parts) + ".")
    return lines


def conclusion(comparisons: Sequence[Comparison], *, what: str = "environment") -> str:
    """The verdict in one line, the first a reader sees: which methods beat the baseline by more
    than the seed spread somewhere, or that none did, or that one seed allows no conclusion."""
    baseline = comparisons[0].baseline
    winners = list(dict.fromkeys(c.method for c in comparisons if c.outcome == "better"))
    if winners:
        return (f"{_join(winners)} beat {baseline} by more than the seed spread on at least one {what} "
                "(the detail follows).")
    if all(c.spread is None for c in comparisons):
        return f"One seed only: nothing can be concluded about any method against {baseline}."
    return f"No method beat {baseline} by more than the seed spread on any {what}."


def winners_sentence(comparisons: Sequence[Comparison], *, selection: str, fmt: Callable[[float], str] = lambda v: f"{v:.3g}") -> str:
    """One sentence: under `selection`, which methods beat the baseline where (by how much, in how
    many seeds), or that none did."""
    better = [c for c in comparisons if c.outcome == "better"]
    if not better:
        baseline = comparisons[0].baseline if comparisons else "the baseline"
        return f"Under {selection}, no method beat {baseline} by more than the seed spread."
    by_method: dict[str, list[str]] = {}
    for c in better:
        by_method.setdefault(c.method, []).append(
            f"{c.where} (+{fmt(c.gain)}, better in {c.wins} of {c.n_seeds} seeds)")
    return (f"Under {selection}, " + "; ".join(f"{m} beat {better[0].baseline} on {_join(w)}" for m, w in by_method.items())
            + ".")
