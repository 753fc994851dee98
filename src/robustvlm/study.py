"""`robustvlm study CONFIG.yaml`: methods x seeds -> train -> evaluate -> results.json + report.

Study config (YAML or dict):
  base:     a run config without `method` (model, data, train, eval)
  methods:  {label: {method: <registry name>, <hyperparameter>: value, ...}}; the first label is
            the baseline of the significance tests (normally ERM)
  seeds:    [0, 1, 2]: each sets train.seed and, for methods with a `seed` hyperparameter (BIRM
            draws), that seed too unless the method entry fixes it; data stay the same for all
  launch:   optional {accelerate_config: PATH, num_processes: N}: each training runs under
            `accelerate launch` (e.g. DeepSpeed ZeRO-2) in a child process; evaluation stays here
  metrics:  which per-example scores to tabulate (names from the metrics registry; default the
            registry's study defaults [chrf, bertscore, cee], the paper's Table 1); each is added
            to the runs' eval.metrics, except a metric whose needed setting is not set (CEE
            without eval.judge): it is then listed as absent in the report, never scored 0

Layout of OUT: runs/<label>/seed-<s>/{config.hash, train/, eval/}, results.json, report.md,
report.html and the PNGs. A run whose config.hash matches and that has train/final and
eval/metrics.json is reused as is; an interrupted one resumes; a run directory whose stored hash
differs from the new config is an error (use a new --out), so results are never mixed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import ValidationError

from robustvlm.analysis.stats import bootstrap_ci, mean_std, paired_bootstrap_test
from robustvlm.config import EvalConfig, RunConfig, deep_merge, validate_config
from robustvlm.data.from_config import load_from_config
from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation.metrics.registry import (
    METRICS,
    check_metric_names,
    study_default_metrics,
)
from robustvlm.evaluation.runner import evaluate
from robustvlm.jsonl import read_appended_rows
from robustvlm.objectives import REGISTRY
from robustvlm.report.study_report import write_study_report
from robustvlm.study_dry_run import dry_run_spec
from robustvlm.training.launch import LaunchConfig, launched_train
from robustvlm.workflows.train import train

STUDY_KEYS = {"base", "methods", "seeds", "metrics", "launch"}
GROUPS = ("id", "ood")
N_BOOT = 2000


# ---------------------------------------------------------------- configuration


def _read_spec(config: str | Path | Mapping) -> tuple[dict, str]:
    if isinstance(config, Mapping):
        return dict(config), "study config"
    path = Path(config)
    if not path.is_file():
        raise ConfigError(f"{path}: study config file not found")
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(spec, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping (base, methods, seeds, metrics)"
        )
    return spec, str(path)


@dataclass(frozen=True)
class StudyPlan:
    """A validated study: {label: {seed: RunConfig}}, seeds, tabulated metrics, launcher."""

    runs: dict[str, dict[int, RunConfig]]
    seeds: list[int]
    metrics: list[str]
    launch: LaunchConfig | None = None


def study_runs(config: str | Path | Mapping, *, dry_run: bool = False) -> StudyPlan:
    """Validate a study config (with `dry_run`, its tiny local stand-in: see `dry_run_spec`)."""
    spec, source = _read_spec(config)
    if dry_run:
        spec, source = dry_run_spec(spec), f"{source} (dry run)"
    unknown = sorted(set(spec) - STUDY_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {unknown}; expected {', '.join(sorted(STUDY_KEYS))}"
        )
    base = spec.get("base")
    if not isinstance(base, dict):
        raise ConfigError(
            f"{source}: base: a run config mapping (model, data, train, eval) is required"
        )
    if "method" in base or "method_args" in base:
        raise ConfigError(f"{source}: base.method: methods are given under `methods`, not in base")
    methods = spec.get("methods")
    if not isinstance(methods, dict) or not methods:
        raise ConfigError(
            f"{source}: methods: a non-empty mapping {{label: {{method: name, ...}}}} is required"
        )
    seeds = spec.get("seeds", [0])
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise ConfigError(
            f"{source}: seeds: a non-empty list of distinct integers is required (got {seeds!r})"
        )
    metrics = spec.get("metrics", study_default_metrics())
    if not isinstance(metrics, list) or not metrics:
        raise ConfigError(
            f"{source}: metrics: a non-empty list of metric names is required (got {metrics!r})"
        )
    check_metric_names(metrics, key=f"{source}: metrics")
    if isinstance(base.get("eval"), dict) and "metrics" in base["eval"]:
        check_metric_names(base["eval"]["metrics"], key=f"{source}: base.eval.metrics")
    eval_metrics = computed_metrics(base, metrics)
    try:
        launch = LaunchConfig.model_validate(spec["launch"]) if spec.get("launch") else None
    except ValidationError as err:
        raise ConfigError(f"{source}: launch: {err.errors()[0]['msg']} ({err.errors()[0]['loc']})") from None

    runs: dict[str, dict[int, RunConfig]] = {}
    for label, entry in methods.items():
        if not isinstance(entry, dict) or "method" not in entry:
            raise ConfigError(
                f"{source}: methods.{label}: a mapping with a `method` key is required"
            )
        args = {k: v for k, v in entry.items() if k != "method"}
        name = entry["method"]
        if name not in REGISTRY:
            raise ConfigError(
                f"{source}: methods.{label}.method: unknown method '{name}'; choose one of {sorted(REGISTRY)}"
            )
        runs[str(label)] = {}
        for seed in seeds:
            seeded = {"seed": seed, **args} if "seed" in REGISTRY[name].hparams else args
            raw = deep_merge(base, {
                "train": {"seed": seed}, "method": name, "method_args": seeded,
                "eval": {"metrics": eval_metrics},
            })
            runs[str(label)][seed] = validate_config(
                raw, f"{source} (methods.{label}, seed {seed})"
            )
    return StudyPlan(runs, list(seeds), list(metrics), launch)


def computed_metrics(base: Mapping, metrics: Sequence[str]) -> list[str]:
    """The runs' eval.metrics: base's own plus the study's, less those whose needed setting base
    leaves unset (CEE without eval.judge)."""
    base_eval = base.get("eval") or {}
    wanted = list(base_eval.get("metrics", EvalConfig().metrics))
    wanted += [m for m in metrics if m not in wanted]
    return [m for m in wanted if METRICS[m].missing(base_eval) is None]


def absent_metrics(
    metrics: Sequence[str], computed: Sequence[str], *, dry_run: bool = False
) -> dict[str, str]:
    """{metric: why the report shows it as absent} for tabulated metrics no run computes."""
    return {m: _absent_reason(m, dry_run) for m in metrics if m not in computed}


def _absent_reason(name: str, dry_run: bool) -> str:
    needs = METRICS[name].needs
    if needs is None or not needs.required:
        return "not computed"
    if dry_run:
        return f"the dry run calls no {needs.what}"
    return f"no {needs.what} configured (set eval.{needs.key} to {needs.how})"


def config_hash(cfg: RunConfig) -> str:
    """sha256 of the resolved run config as canonical JSON (sorted keys)."""
    text = json.dumps(cfg.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- running


def _claim_run_dir(run_dir: Path, digest: str) -> None:
    """Record the config hash of a run dir; a different stored hash is an error."""
    hash_path = run_dir / "config.hash"
    if hash_path.is_file():
        stored = hash_path.read_text(encoding="utf-8").strip()
        if stored != digest:
            raise ConfigError(
                f"{run_dir}: holds a run of a different configuration (config.hash {stored[:12]} != "
                f"{digest[:12]}); use a new --out instead of mixing results"
            )
        return
    if (run_dir / "train").exists():
        raise ConfigError(
            f"{run_dir}: holds outputs without a config.hash, so they may come from another "
            "configuration; use a new --out"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    hash_path.write_text(digest + "\n", encoding="utf-8")


def _is_finished(run_dir: Path) -> bool:
    return (run_dir / "train" / "final").is_dir() and (run_dir / "eval" / "metrics.json").is_file()


def _run_one(cfg: RunConfig, run_dir: Path, progress: bool, launch: LaunchConfig | None) -> dict:
    """Train + evaluate one (method, seed), or reuse its finished outputs; returns its metrics."""
    _claim_run_dir(run_dir, config_hash(cfg))
    if _is_finished(run_dir):
        return json.loads((run_dir / "eval" / "metrics.json").read_text(encoding="utf-8"))
    if launch is None:
        final_dir = train(cfg, run_dir / "train", resume=True, progress=progress).final_dir
    else:
        final_dir = launched_train(cfg, run_dir / "train", launch)
    examples = load_from_config(cfg.data, run_dir / "train", verbose=False)
    return evaluate(
        final_dir, examples, run_dir / "eval", cfg=cfg.eval, resume=True, progress=progress
    )


def run_dir_of(out_dir: Path, label: str, seed: int) -> Path:
    """Where the run of method `label` with `seed` lives: OUT/runs/<label>/seed-<seed>."""
    return out_dir / "runs" / label / f"seed-{seed}"


def sum_cee_counts(run_metrics: Iterable[Mapping]) -> dict[str, int] | None:
    """The CEE judge's undecided / unreadable counts summed over a method's runs (None: no CEE)."""
    counts = [m["cee_counts"] for m in run_metrics if "cee_counts" in m]
    return {k: sum(c[k] for c in counts) for k in counts[0]} if counts else None


def _jsonl(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def run_study(
    config: str | Path | Mapping,
    out_dir: str | Path,
    *,
    progress: bool = True,
    dry_run: bool = False,
) -> dict:
    """Run every (method, seed) of a study, aggregate, write results.json, report.md/.html.

    With `dry_run`, the study's tiny local stand-in runs instead (see `dry_run_spec`).

    Returns the results written to results.json: `aggregate_study`'s dict plus "seeds" and, per
    method, "method", "method_args" (of the first seed) and "runs" {seed: {run_dir, metrics}}.
    """
    out_dir = Path(out_dir)
    plan = study_runs(config, dry_run=dry_run)
    runs, seeds, metrics = plan.runs, plan.seeds, plan.metrics
    rows: dict[str, dict[int, list[dict]]] = {}
    run_info: dict[str, dict[str, dict]] = {}
    for label, by_seed in runs.items():
        for seed, cfg in by_seed.items():
            run_dir = run_dir_of(out_dir, label, seed)
            if progress:
                print(f"\n=== {label}, seed {seed} ===")
            run_metrics = _run_one(cfg, run_dir, progress, plan.launch)
            rows.setdefault(label, {})[seed] = read_appended_rows(
                run_dir / "eval" / "predictions.jsonl"
            )
            run_info.setdefault(label, {})[str(seed)] = {
                "run_dir": str(run_dir),
                "metrics": run_metrics,
            }
    first = runs[next(iter(runs))][seeds[0]]
    results = {
        "dry_run": dry_run,
        "seeds": seeds,
        **aggregate_study(rows, metrics),
        "absent": absent_metrics(metrics, first.eval.metrics, dry_run=dry_run),
    }
    for label, info in run_info.items():
        cfg = runs[label][seeds[0]]
        results["methods"][label].update(
            method=cfg.method, method_args=cfg.method_args, runs=info,
            cee_counts=sum_cee_counts(run["metrics"] for run in info.values()),
        )
    (out_dir / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    write_study_report(
        results,
        out_dir,
        logs={
            label: _jsonl(run_dir_of(out_dir, label, seeds[0]) / "train" / "train_log.jsonl")
            for label in runs
        },
        predictions={label: rows[label][seeds[0]] for label in runs},
    )
    return results


# ---------------------------------------------------------------- aggregation (pure)


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


def _group_rows(rows: Sequence[dict], group: str, metric: str) -> list[dict]:
    ood = group == "ood"
    return [r for r in rows if bool(r["ood"]) == ood and r["scores"].get(metric) is not None]


def summarize_method(
    seed_rows: Mapping[Any, Sequence[dict]],
    metrics: Sequence[str],
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict:
    """ID / OOD summary of one method over seeds, from per-example prediction rows.

    Args:
        seed_rows: {seed: rows}, rows as in predictions.jsonl (id, env, ood, scores{metric}).
        metrics: metric names to summarise; a metric no row scored gives None entries.

    Returns:
        {group: {metric: {"mean", "std", "ci", "seeds", "n"}}} for group in id/ood:
        - per seed, the score is the macro mean over the group's environments (as metrics.json);
          mean and std (ddof=1, None for one seed) are taken over these per-seed scores;
        - ci is a 95% percentile bootstrap: the resampled units are the (seed, example) rows of
          the group pooled over all seeds, drawn with replacement, and each resample's statistic
          is the macro mean over environments; n is the number of pooled rows.
    """
    out: dict[str, dict] = {}
    for group in GROUPS:
        out[group] = {}
        for metric in metrics:
            per_seed = [_group_rows(rows, group, metric) for rows in seed_rows.values()]
            per_seed = [rows for rows in per_seed if rows]
            if not per_seed:
                out[group][metric] = {"mean": None, "std": None, "ci": None, "seeds": 0, "n": 0}
                continue
            seed_scores = [
                _macro_mean(
                    np.array([r["scores"][metric] for r in rows], dtype=float),
                    np.array([r["env"] for r in rows]),
                )
                for rows in per_seed
            ]
            mean, std = mean_std(seed_scores)
            pooled = [r for rows in per_seed for r in rows]
            lo, hi = _macro_mean_ci(
                np.array([r["scores"][metric] for r in pooled], dtype=float),
                np.array([r["env"] for r in pooled]),
                n_boot=n_boot,
                seed=seed,
            )
            out[group][metric] = {
                "mean": mean,
                "std": std,
                "ci": [lo, hi],
                "seeds": len(seed_scores),
                "n": len(pooled),
            }
    return out


def per_env_means(seed_rows: Mapping[Any, Sequence[dict]], metrics: Sequence[str]) -> dict:
    """{env: {"ood": bool, metric: mean over seeds of the per-seed environment mean | None}}."""
    envs: dict[str, dict] = {}
    for rows in seed_rows.values():
        for r in rows:
            envs.setdefault(r["env"], {"ood": bool(r["ood"])})
    for env, info in envs.items():
        for metric in metrics:
            per_seed = [
                [
                    r["scores"][metric]
                    for r in rows
                    if r["env"] == env and r["scores"].get(metric) is not None
                ]
                for rows in seed_rows.values()
            ]
            per_seed = [s for s in per_seed if s]
            info[metric] = float(np.mean([np.mean(s) for s in per_seed])) if per_seed else None
    return dict(sorted(envs.items()))


def seed_averaged_scores(
    seed_rows: Mapping[Any, Sequence[dict]], group: str, metric: str
) -> dict[str, float]:
    """{example id: score averaged over the seeds that scored it} for the rows of one group."""
    sums: dict[str, list[float]] = {}
    for rows in seed_rows.values():
        for r in _group_rows(rows, group, metric):
            sums.setdefault(r["id"], []).append(float(r["scores"][metric]))
    return {ex_id: float(np.mean(v)) for ex_id, v in sums.items()}


def paired_tests(
    rows: Mapping[str, Mapping[Any, Sequence[dict]]],
    baseline: str,
    metrics: Sequence[str],
    *,
    n_boot: int = 10000,
    seed: int = 0,
) -> dict:
    """Paired bootstrap test of every method against `baseline`, ID and OOD separately.

    Each example's score is averaged over seeds first; methods are paired on the example ids both
    scored (sorted), and `paired_bootstrap_test(method, baseline)` runs on those. Returns
    {label: {group: {metric: test dict | None}}}, None where no shared example was scored.
    """
    out: dict[str, dict] = {}
    for label, seed_rows in rows.items():
        if label == baseline:
            continue
        out[label] = {}
        for group in GROUPS:
            out[label][group] = {}
            for metric in metrics:
                a = seed_averaged_scores(seed_rows, group, metric)
                b = seed_averaged_scores(rows[baseline], group, metric)
                shared = sorted(set(a) & set(b))
                if not shared:
                    out[label][group][metric] = None
                    continue
                test = paired_bootstrap_test(
                    [a[i] for i in shared], [b[i] for i in shared], n_boot=n_boot, seed=seed
                )
                out[label][group][metric] = {**test, "ci": list(test["ci"])}
    return out


def aggregate_study(
    rows: Mapping[str, Mapping[Any, Sequence[dict]]], metrics: Sequence[str]
) -> dict:
    """Everything the report shows, from {label: {seed: prediction rows}}; the first label is the baseline."""
    if not rows:
        raise DataError("aggregate_study needs at least one method's prediction rows")
    baseline = next(iter(rows))
    return {
        "metrics": list(metrics),
        "baseline": baseline,
        "methods": {
            label: {
                "summary": summarize_method(seed_rows, metrics),
                "per_env": per_env_means(seed_rows, metrics),
            }
            for label, seed_rows in rows.items()
        },
        "significance": paired_tests(rows, baseline, metrics),
    }
