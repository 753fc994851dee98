"""A study's numbers from its per-example rows: split summaries, per-environment means, paired tests.

The input of every function is {method label: {seed: rows}}, rows as in an evaluation's
predictions.jsonl: {"id", "env", "ood", "scores": {metric: value | None}}. A split ("id" or
"ood") is the in-domain or the out-of-domain environments; its score is the macro mean over its
environments of the per-environment mean. Pure functions: no file or model I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robustvlm.analysis.stats import bootstrap_ci, paired_bootstrap_test
from robustvlm.analysis.study_paired import StudyPaired, study_paired
from robustvlm.analysis.summary import EvalMetrics
from robustvlm.analysis.verdict import Comparison, compare, seed_spread
from robustvlm.errors import DataError

SPLITS = ("id", "ood")
N_BOOT = 2000
SeedRows = Mapping[Any, Sequence[dict]]


@dataclass(frozen=True)
class ScoreSummary:
    """One method's score on one split for one metric, over seeds.

    Attributes:
        mean, std: of the per-seed split scores (std with ddof=1; None for one seed; both None
            when no row was scored).
        ci: 95% percentile bootstrap interval; the resampled units are the split's (seed,
            example) rows pooled over seeds, the statistic the macro mean over environments.
        seeds: seeds with a score; n: pooled rows.
        per_seed: {seed: the split score of that seed}.
        seed_ci: 95% percentile bootstrap interval of the mean over seeds, resampling seeds
            (None for one seed).
    """

    mean: float | None
    std: float | None
    ci: tuple[float, float] | None
    seeds: int
    n: int
    per_seed: dict[str, float] = field(default_factory=dict)
    seed_ci: tuple[float, float] | None = None

    def to_dict(self) -> dict:
        return {"mean": self.mean, "std": self.std, "ci": list(self.ci) if self.ci else None,
                "seeds": self.seeds, "n": self.n, "per_seed": self.per_seed,
                "seed_ci": list(self.seed_ci) if self.seed_ci else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScoreSummary:
        """Read back what `to_dict` wrote."""
        return cls(data["mean"], data["std"], _pair(data["ci"]), data["seeds"], data["n"],
                   dict(data["per_seed"]), _pair(data["seed_ci"]))


def _pair(value: Sequence[float] | None) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if value else None


@dataclass(frozen=True)
class EnvScores:
    """One environment's scores of one method: metric -> mean over seeds (None: unscored)."""

    ood: bool
    scores: dict[str, float | None]

    def to_dict(self) -> dict:
        return {"ood": self.ood, **self.scores}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvScores:
        """Read back what `to_dict` wrote."""
        return cls(bool(data["ood"]), {k: v for k, v in data.items() if k != "ood"})


@dataclass(frozen=True)
class PairedTest:
    """A method against the baseline on the examples both scored (see `paired_bootstrap_test`):
    delta = mean(method - baseline) with its 95% CI, two-sided p, n pairs."""

    delta: float
    ci: tuple[float, float]
    p_value: float
    n: int
    n_boot: int

    def to_dict(self) -> dict:
        return {"delta": self.delta, "ci": list(self.ci), "p_value": self.p_value, "n": self.n,
                "n_boot": self.n_boot}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedTest:
        """Read back what `to_dict` wrote."""
        lo, hi = data["ci"]
        return cls(data["delta"], (lo, hi), data["p_value"], data["n"], data["n_boot"])


@dataclass(frozen=True)
class MethodScores:
    """A method's summary {split: {metric: ScoreSummary}}, per-environment means and its
    worst-environment score {metric: ScoreSummary} (see `worst_env_summary`)."""

    summary: dict[str, dict[str, ScoreSummary]]
    per_env: dict[str, EnvScores]
    worst: dict[str, ScoreSummary] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "summary": {split: {m: v.to_dict() for m, v in by.items()} for split, by in self.summary.items()},
            "per_env": {env: e.to_dict() for env, e in self.per_env.items()},
            "worst_env": {m: v.to_dict() for m, v in self.worst.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MethodScores:
        """Read back what `to_dict` wrote (other keys of `data` are ignored)."""
        return cls(
            {split: {m: ScoreSummary.from_dict(v) for m, v in by.items()} for split, by in data["summary"].items()},
            {env: EnvScores.from_dict(e) for env, e in data["per_env"].items()},
            {m: ScoreSummary.from_dict(v) for m, v in data.get("worst_env", {}).items()},
        )


@dataclass(frozen=True)
class StudyScores:
    """What a study measured: every method's scores and tests against the first (the baseline).

    `significance[label][split][metric]` is None where the two methods share no scored example;
    the baseline has no entry. `paired[label][metric][environment]`: the per-question paired
    comparison on correctness (`analysis.study_paired`).
    """

    metrics: list[str]
    baseline: str
    methods: dict[str, MethodScores]
    significance: dict[str, dict[str, dict[str, PairedTest | None]]]
    paired: dict[str, dict[str, dict[str, StudyPaired]]] = field(default_factory=dict)


def _macro_mean(scores: np.ndarray, envs: np.ndarray) -> float:
    """Mean over environments of the per-environment mean score."""
    return float(np.mean([scores[envs == e].mean() for e in np.unique(envs)]))


def _macro_mean_ci(
    scores: np.ndarray, envs: np.ndarray, *, n_boot: int, seed: int
) -> tuple[float, float]:
    """95% percentile bootstrap CI of the macro mean, resampling rows (score, env) with replacement."""
    # bootstrap_ci resamples the values it is given: pass row indices, look scores up in `stat`.
    return bootstrap_ci(
        np.arange(scores.size, dtype=float),
        stat=lambda idx: _macro_mean(scores[idx.astype(int)], envs[idx.astype(int)]),
        n_boot=n_boot,
        seed=seed,
    )


def _split_rows(rows: Sequence[dict], split: str, metric: str) -> list[dict]:
    ood = split == "ood"
    return [r for r in rows if bool(r["ood"]) == ood and r["scores"].get(metric) is not None]


def _columns(rows: Sequence[dict], metric: str) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([r["scores"][metric] for r in rows], dtype=float), np.array([r["env"] for r in rows]))


def summarize_method(
    seed_rows: SeedRows, metrics: Sequence[str], *, n_boot: int = N_BOOT, seed: int = 0
) -> dict[str, dict[str, ScoreSummary]]:
    """{split: {metric: ScoreSummary}} of one method over its seeds (see ScoreSummary)."""
    out: dict[str, dict[str, ScoreSummary]] = {}
    for split in SPLITS:
        out[split] = {}
        for metric in metrics:
            per_seed = {str(s): r for s, rows in seed_rows.items() if (r := _split_rows(rows, split, metric))}
            if not per_seed:
                out[split][metric] = ScoreSummary(None, None, None, 0, 0)
                continue
            scores = {s: _macro_mean(*_columns(rows, metric)) for s, rows in per_seed.items()}
            spread = seed_spread(list(scores.values()), n_boot=n_boot, seed=seed)
            pooled = [r for rows in per_seed.values() for r in rows]
            ci = _macro_mean_ci(*_columns(pooled, metric), n_boot=n_boot, seed=seed)
            out[split][metric] = ScoreSummary(spread.mean, spread.sd, ci, len(per_seed), len(pooled), scores,
                                              spread.ci)
    return out


def worst_env_summary(seed_rows: SeedRows, metrics: Sequence[str]) -> dict[str, ScoreSummary]:
    """{metric: ScoreSummary} of the worst environment (the WILDS / DomainBed convention): per
    seed, the lowest per-environment mean over every environment, in-domain and out-of-domain;
    then mean ± std over seeds (no pooled-row CI; n = the seeds' scored rows)."""
    out = {}
    for metric in metrics:
        worst, n = {}, 0
        for s, rows in seed_rows.items():
            scored = [r for r in rows if r["scores"].get(metric) is not None]
            if not scored:
                continue
            scores, envs = _columns(scored, metric)
            worst[str(s)] = min(float(scores[envs == e].mean()) for e in np.unique(envs))
            n += len(scored)
        if not worst:
            out[metric] = ScoreSummary(None, None, None, 0, 0)
            continue
        spread = seed_spread(list(worst.values()))
        out[metric] = ScoreSummary(spread.mean, spread.sd, None, len(worst), n, worst, spread.ci)
    return out


def per_env_means(seed_rows: SeedRows, metrics: Sequence[str]) -> dict[str, EnvScores]:
    """{env: EnvScores}: per metric, the mean over seeds of the per-seed environment mean."""
    ood_of: dict[str, bool] = {}
    for rows in seed_rows.values():
        for r in rows:
            ood_of.setdefault(r["env"], bool(r["ood"]))
    out = {}
    for env in sorted(ood_of):
        scores: dict[str, float | None] = {}
        for metric in metrics:
            per_seed = [
                [r["scores"][metric] for r in rows if r["env"] == env and r["scores"].get(metric) is not None]
                for rows in seed_rows.values()
            ]
            per_seed = [s for s in per_seed if s]
            scores[metric] = float(np.mean([np.mean(s) for s in per_seed])) if per_seed else None
        out[env] = EnvScores(ood_of[env], scores)
    return out


def seed_averaged_scores(seed_rows: SeedRows, split: str, metric: str) -> dict[str, float]:
    """{example id: score averaged over the seeds that scored it} for the rows of one split."""
    sums: dict[str, list[float]] = {}
    for rows in seed_rows.values():
        for r in _split_rows(rows, split, metric):
            sums.setdefault(r["id"], []).append(float(r["scores"][metric]))
    return {ex_id: float(np.mean(v)) for ex_id, v in sums.items()}


def paired_tests(
    rows: Mapping[str, SeedRows],
    baseline: str,
    metrics: Sequence[str],
    *,
    n_boot: int = 10000,
    seed: int = 0,
) -> dict[str, dict[str, dict[str, PairedTest | None]]]:
    """Paired bootstrap test of every method against `baseline`, per split and metric.

    Each example's score is averaged over seeds first; methods are paired on the example ids
    both scored (sorted), and `paired_bootstrap_test(method, baseline)` runs on those.
    """
    out: dict[str, dict[str, dict[str, PairedTest | None]]] = {}
    base = {
        (split, metric): seed_averaged_scores(rows[baseline], split, metric)
        for split in SPLITS
        for metric in metrics
    }
    for label, seed_rows in rows.items():
        if label == baseline:
            continue
        out[label] = {}
        for split in SPLITS:
            out[label][split] = {}
            for metric in metrics:
                a = seed_averaged_scores(seed_rows, split, metric)
                b = base[split, metric]
                shared = sorted(set(a) & set(b))
                out[label][split][metric] = (
                    PairedTest(**paired_bootstrap_test(
                        [a[i] for i in shared], [b[i] for i in shared], n_boot=n_boot, seed=seed
                    ))
                    if shared else None
                )
    return out


def aggregate_study(rows: Mapping[str, SeedRows], metrics: Sequence[str]) -> StudyScores:
    """Everything a study reports, from {label: {seed: rows}}; the first label is the baseline."""
    if not rows:
        raise DataError("aggregate_study needs at least one method's prediction rows")
    baseline = next(iter(rows))
    return StudyScores(
        metrics=list(metrics),
        baseline=baseline,
        methods={
            label: MethodScores(
                summarize_method(seed_rows, metrics),
                per_env_means(seed_rows, metrics),
                worst_env_summary(seed_rows, metrics),
            )
            for label, seed_rows in rows.items()
        },
        significance=paired_tests(rows, baseline, metrics),
        paired=study_paired(rows, baseline),
    )


def study_comparisons(scores: StudyScores, name: Callable[[str], str] = str) -> list[Comparison]:
    """Every method against the baseline, on the per-seed scores of each split and each metric and
    on the worst environment (higher is better; `name` writes a metric); settings with no score
    on either side are left out."""
    base = scores.methods[scores.baseline]
    out = []
    for label, method in scores.methods.items():
        if label == scores.baseline:
            continue
        for metric in scores.metrics:
            cells = [(f"{split.upper()} {name(metric)}", method.summary[split].get(metric), base.summary[split].get(metric))
                     for split in SPLITS]
            cells.append((f"worst environment {name(metric)}", method.worst.get(metric), base.worst.get(metric)))
            out += [compare(label, scores.baseline, where, ours.per_seed, theirs.per_seed)
                    for where, ours, theirs in cells if ours and theirs and ours.per_seed and theirs.per_seed]
    return out


def sum_counts(counts: Iterable[Mapping[str, int] | None]) -> dict[str, int] | None:
    """Counts (e.g. the CEE judge's undecided samples) summed over runs; None when none had any."""
    present = [c for c in counts if c]
    return {k: sum(c[k] for c in present) for k in present[0]} if present else None


@dataclass(frozen=True)
class RunRecord:
    """One (method, seed) run: its folder and its evaluation's metrics."""

    run_dir: str
    metrics: EvalMetrics


@dataclass(frozen=True)
class MethodRuns:
    """A method's objective, hyperparameters (of its first seed), runs by seed, and the CEE
    judge's undecided-sample counts summed over its runs (None without CEE)."""

    method: str
    method_args: dict[str, Any]
    runs: dict[str, RunRecord]
    cee_counts: dict[str, int] | None = None


def was_smoke_run(data: Mapping[str, Any]) -> bool:
    """Whether a study's results.json came from a smoke run: its `smoke` key, or `dry_run` in
    files written before the smoke run had its own name."""
    return bool(data.get("smoke", data.get("dry_run", False)))


@dataclass(frozen=True)
class StudyResults:
    """A finished study: its scores, its runs, and the tabulated metrics no run computed (with
    the reason the report shows); with `zero_shot`, the scores of the untouched model (step 0)
    on the same records (one evaluation: no seeds, no tests). `smoke`: a smoke run of a recipe
    (`study --smoke`); `quick`: a quick demo (`demo tasks --quick`): both check code, not methods."""

    scores: StudyScores
    runs: dict[str, MethodRuns]
    seeds: list[int]
    absent: dict[str, str]
    smoke: bool = False
    zero_shot: MethodScores | None = None
    quick: bool = False

    def to_dict(self) -> dict:
        """The results.json content (`zero_shot` only when measured)."""
        s = self.scores
        methods = {
            label: {
                **scores.to_dict(),
                "method": self.runs[label].method,
                "method_args": self.runs[label].method_args,
                "runs": {
                    seed: {"run_dir": r.run_dir, "metrics": r.metrics.to_dict()}
                    for seed, r in self.runs[label].runs.items()
                },
                "cee_counts": self.runs[label].cee_counts,
            }
            for label, scores in s.methods.items()
        }
        significance = {
            label: {split: {m: t.to_dict() if t else None for m, t in by.items()} for split, by in splits.items()}
            for label, splits in s.significance.items()
        }
        paired = {label: {m: {g: c.to_dict() for g, c in by.items()} for m, by in metrics.items()}
                  for label, metrics in s.paired.items()}
        return {"smoke": self.smoke, "quick": self.quick, "seeds": self.seeds, "metrics": s.metrics, "baseline": s.baseline,
                "methods": methods, "significance": significance, "paired": paired, "absent": self.absent,
                **({"zero_shot": self.zero_shot.to_dict()} if self.zero_shot else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudyResults:
        """Read back what `to_dict` wrote (a study's results.json)."""
        methods = data["methods"]
        scores = StudyScores(
            metrics=list(data["metrics"]),
            baseline=data["baseline"],
            methods={label: MethodScores.from_dict(m) for label, m in methods.items()},
            significance={
                label: {split: {m: PairedTest.from_dict(t) if t else None for m, t in by.items()}
                        for split, by in splits.items()}
                for label, splits in data["significance"].items()
            },
            paired={label: {m: {g: StudyPaired.from_dict(c) for g, c in by.items()} for m, by in metrics.items()}
                    for label, metrics in data.get("paired", {}).items()},
        )
        runs = {
            label: MethodRuns(m["method"], dict(m["method_args"]),
                              {seed: RunRecord(r["run_dir"], EvalMetrics.from_dict(r["metrics"]))
                               for seed, r in m["runs"].items()},
                              m.get("cee_counts"))
            for label, m in methods.items()
        }
        zero_shot = MethodScores.from_dict(data["zero_shot"]) if data.get("zero_shot") else None
        return cls(scores, runs, list(data["seeds"]), dict(data["absent"]), was_smoke_run(data), zero_shot,
                   bool(data.get("quick", False)))


def zero_shot_scores(rows: Sequence[dict], metrics: Sequence[str]) -> MethodScores:
    """The scores of one evaluation of the untouched model (its rows as a single seed, "0")."""
    seed_rows = {"0": rows}
    return MethodScores(summarize_method(seed_rows, metrics), per_env_means(seed_rows, metrics),
                        worst_env_summary(seed_rows, metrics))
