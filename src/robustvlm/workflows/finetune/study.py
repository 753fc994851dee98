"""`robustvlm study CONFIG.yaml`: methods x seeds -> train -> evaluate -> results.json + report.

Study config (YAML or dict):
  base:     a run config without `method` (model, data, train, eval)
  methods:  {label: {method: <registry name>, <hyperparameter>: value, ...}}; the first label is
            the baseline of the significance tests (normally ERM)
  seeds:    [0, 1, 2]: each sets train.seed and, for methods with a `seed` hyperparameter (BIRM
            draws), that seed too unless the method entry fixes it; data stay the same for all
  launcher: optional {accelerate_config: PATH, num_processes: N}: each training runs under
            `accelerate launch` (e.g. DeepSpeed ZeRO-2) in a child process; evaluation stays here
            (the key's old name `launch:` is accepted, with a deprecation message, for one release)
  metrics:  which per-example scores to tabulate (names from the metrics registry; default the
            registry's study defaults [chrf, bertscore, cee], the paper's Table 1); each is added
            to the runs' eval.metrics, except a metric whose needed setting is not set (CEE
            without eval.judge): it is then listed as absent in the report, never scored 0
  zero_shot: optional, default false: also evaluate base.model untouched (step 0) on the same
            records (OUT/runs/zero-shot/eval); the report shows its row beside the fine-tuned
            ones (one evaluation: no seeds, no significance test)

Layout of OUT: runs/<label>/seed-<s>/{train/, eval/}, results.json, report.md, report.html and
the PNGs. Every run folder is claimed through `robustvlm.runs` with resume on: a finished run
(train/final and eval/metrics.json) is reused as is, an interrupted one resumes, and a run folder
whose stored settings differ from the new ones is an error naming the keys (use a new --out), so
results are never mixed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from robustvlm.analysis.study import (
    MethodRuns,
    RunRecord,
    StudyResults,
    aggregate_study,
    sum_counts,
    zero_shot_scores,
)
from robustvlm.analysis.summary import EvalMetrics
from robustvlm.config import EvalConfig, RunConfig, deep_merge, read_yaml_mapping, validate_config
from robustvlm.data.from_config import load_from_config
from robustvlm.evaluation.metrics.registry import (
    METRICS,
    check_metric_names,
    check_needs,
    study_default_metrics,
)
from robustvlm.machine import write_results_json
from robustvlm.model_ref import ModelRef
from robustvlm.objectives import REGISTRY
from robustvlm.report.study_report import STUDY_TITLE, write_study_report
from robustvlm.runs import claim_run_folder, lock_run_folder, make_output_folder, read_jsonl
from robustvlm.training.launch import LaunchConfig, launched_train
from robustvlm.workflows.finetune.evaluate import METRICS_FILE, evaluate
from robustvlm.workflows.finetune.study_smoke import smoke_spec
from robustvlm.workflows.finetune.train import train
from robustvlm.workflows.plan_configs import MatrixConfig, StudyConfig, SweepConfig

MultiRun = TypeVar("MultiRun", StudyConfig, SweepConfig, MatrixConfig)


# ---------------------------------------------------------------- configuration


def read_methods_config(
    config: str | Path | Mapping,
    kind: str,
    schema: type[MultiRun],
    smoke_spec: Callable[[Mapping], dict],
    *,
    smoke: bool = False,
) -> tuple[MultiRun, str]:
    """Read and validate a config of many runs (a study's, a sweep's or a matrix's).

    Args:
        config: a YAML path or the mapping itself (copied, never modified).
        kind: how messages name it ("study config").
        schema: its typed model (`workflows.plan_configs`).
        smoke_spec: the config's tiny stand-in, used when `smoke`.

    Returns:
        (the validated config, the name messages give it).
    """
    if isinstance(config, Mapping):
        spec, source = copy.deepcopy(dict(config)), kind
    else:
        spec, source = read_yaml_mapping(config, kind, ", ".join(schema.model_fields)), str(config)
    if smoke:
        spec, source = smoke_spec(spec), f"{source} (smoke run)"
    return validate_config(spec, source, schema), source


def seeded_args(name: str, args: dict, seed: int) -> dict:
    """An objective's arguments for a trial seed: the seed also seeds its own draws (BIRM's)
    unless the entry fixes them."""
    return {"seed": seed, **args} if "seed" in REGISTRY[name].hparams else args


@dataclass(frozen=True)
class StudyPlan:
    """A validated study: {label: {seed: RunConfig}}, seeds, tabulated metrics, launcher, and
    whether the untouched model is evaluated too (`zero_shot`)."""

    runs: dict[str, dict[int, RunConfig]]
    seeds: list[int]
    metrics: list[str]
    launcher: LaunchConfig | None = None
    zero_shot: bool = False


def study_runs(config: str | Path | Mapping, *, smoke: bool = False) -> StudyPlan:
    """Validate a study config (with `smoke`, its tiny local stand-in: see `smoke_spec`)."""
    cfg, source = read_methods_config(config, "study config", StudyConfig, smoke_spec, smoke=smoke)
    base, seeds = cfg.base, cfg.seeds
    metrics = cfg.metrics or study_default_metrics()
    check_metric_names(metrics, key=f"{source}: metrics")
    if isinstance(base.get("eval"), dict) and "metrics" in base["eval"]:
        check_metric_names(base["eval"]["metrics"], key=f"{source}: base.eval.metrics")
    eval_metrics = computed_metrics(base, metrics)

    runs: dict[str, dict[int, RunConfig]] = {}
    for label, entry in cfg.methods.items():
        name, args = entry.method, entry.args
        runs[label] = {}
        for seed in seeds:
            raw = deep_merge(base, {
                "train": {"seed": seed}, "method": name, "method_args": seeded_args(name, args, seed),
                "eval": {"metrics": eval_metrics},
            })
            runs[label][seed] = validate_config(
                raw, f"{source} (methods.{label}, seed {seed})"
            )
            check_needs(eval_metrics, dict(runs[label][seed].eval))  # an extra a metric needs
    return StudyPlan(runs=runs, seeds=seeds, metrics=list(metrics), launcher=cfg.launcher, zero_shot=cfg.zero_shot)


def computed_metrics(base: Mapping, metrics: Sequence[str]) -> list[str]:
    """The runs' eval.metrics: base's own plus the study's, less those whose needed setting base
    leaves unset (CEE without eval.judge)."""
    base_eval = base.get("eval") or {}
    wanted = list(base_eval.get("metrics", EvalConfig().metrics))
    wanted += [m for m in metrics if m not in wanted]
    return [m for m in wanted if METRICS[m].missing(base_eval) is None]


def absent_metrics(
    metrics: Sequence[str], computed: Sequence[str], *, smoke: bool = False
) -> dict[str, str]:
    """{metric: why the report shows it as absent} for tabulated metrics no run computes."""
    return {m: _absent_reason(m, smoke) for m in metrics if m not in computed}


def _absent_reason(name: str, smoke: bool) -> str:
    needs = METRICS[name].needs
    if needs is None or not needs.required:
        return "not computed"
    if smoke:
        return f"the smoke run calls no {needs.what}"
    return f"no {needs.what} configured (set eval.{needs.key} to {needs.how})"


# ---------------------------------------------------------------- running


def _is_finished(run_dir: Path) -> bool:
    return (run_dir / "train" / "final").is_dir() and (run_dir / "eval" / METRICS_FILE).is_file()


def _run_one(
    cfg: RunConfig, run_dir: Path, progress: bool, launcher: LaunchConfig | None
) -> EvalMetrics:
    """Train + evaluate one (method, seed), or reuse its finished outputs; returns its metrics."""
    claim_run_folder(run_dir / "train", cfg, command="train", resume=True, write=False)  # refuses other settings
    if _is_finished(run_dir):
        return EvalMetrics.from_dict(json.loads((run_dir / "eval" / METRICS_FILE).read_text(encoding="utf-8")))
    if launcher is None:  # the evaluation reads the records training loaded
        result = train(cfg, run_dir / "train", resume=True, progress=progress)
        final_dir, examples = result.final_dir, result.examples
    else:  # trained in a child process: its records are loaded here
        final_dir = launched_train(cfg, run_dir / "train", launcher)
        examples = load_from_config(cfg.data, run_dir / "train", verbose=False)
    return evaluate(
        ModelRef.folder(final_dir), examples, run_dir / "eval", cfg=cfg.eval, resume=True, progress=progress
    )


ZERO_SHOT = "zero-shot"
"""The folder (OUT/runs/zero-shot) of the untouched model's evaluation."""


def _zero_shot_rows(cfg: RunConfig, out_dir: Path, progress: bool) -> list[dict]:
    """Evaluate `cfg.model` untouched on the records its runs are evaluated on (or reuse that
    evaluation); returns its prediction rows."""
    folder = out_dir / "runs" / ZERO_SHOT
    if progress:
        print(f"\n=== {ZERO_SHOT}: {cfg.model.name} untouched ===")
    examples = load_from_config(cfg.data, folder, verbose=False)
    evaluate(cfg.model.ref, examples, folder / "eval", cfg=cfg.eval, resume=True, progress=progress)
    return read_jsonl(folder / "eval" / "predictions.jsonl")


def run_dir_of(out_dir: Path, label: str, seed: int) -> Path:
    """Where the run of method `label` with `seed` lives: OUT/runs/<label>/seed-<seed>."""
    return out_dir / "runs" / label / f"seed-{seed}"


def run_study(
    config: str | Path | Mapping,
    out_dir: str | Path,
    *,
    progress: bool = True,
    smoke: bool = False,
    quick: bool = False,
    heading: str = STUDY_TITLE,
) -> StudyResults:
    """Run every (method, seed) of a study, aggregate, write results.json, report.md/.html.

    With `smoke`, the study's tiny local stand-in runs instead (see `smoke_spec`); `quick` marks
    a quick demo's study, whose report's verdict says only that it is a smoke test; `heading`
    names the study (the report's title).
    """
    out_dir = Path(out_dir)
    plan = study_runs(config, smoke=smoke)
    make_output_folder(out_dir)
    lock_run_folder(out_dir)  # one writer at a time; each run's folder is claimed on its own
    runs, seeds, metrics = plan.runs, plan.seeds, plan.metrics
    rows: dict[str, dict[int, list[dict]]] = {}
    records: dict[str, dict[str, RunRecord]] = {}
    for label, by_seed in runs.items():
        for seed, cfg in by_seed.items():
            run_dir = run_dir_of(out_dir, label, seed)
            if progress:
                print(f"\n=== {label}, seed {seed} ===")
            run_metrics = _run_one(cfg, run_dir, progress, plan.launcher)
            rows.setdefault(label, {})[seed] = read_jsonl(run_dir / "eval" / "predictions.jsonl")
            records.setdefault(label, {})[str(seed)] = RunRecord(str(run_dir), run_metrics)
    first = runs[next(iter(runs))][seeds[0]]
    results = StudyResults(
        scores=aggregate_study(rows, metrics),
        runs={
            label: MethodRuns(
                method=runs[label][seeds[0]].method,
                method_args=runs[label][seeds[0]].method_args,
                runs=by_seed,
                cee_counts=sum_counts(r.metrics.counts.get("cee") for r in by_seed.values()),
            )
            for label, by_seed in records.items()
        },
        seeds=seeds,
        absent=absent_metrics(metrics, first.eval.metrics, smoke=smoke),
        smoke=smoke,
        quick=quick,
        zero_shot=zero_shot_scores(_zero_shot_rows(first, out_dir, progress), metrics) if plan.zero_shot else None,
    )
    write_results_json(out_dir, results.to_dict())
    write_study_report(
        results,
        out_dir,
        logs={
            label: read_jsonl(run_dir_of(out_dir, label, seeds[0]) / "train" / "train_log.jsonl")
            for label in runs
        },
        predictions={label: rows[label][seeds[0]] for label in runs},
        heading=heading,
    )
    return results
