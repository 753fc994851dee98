"""`robustvlm sweep CONFIG.yaml`: random hyperparameter search x trial seeds, with DomainBed's
model selection (training-domain validation and the test-domain oracle) reported side by side.

Sweep config (YAML or dict):
  base:        a run config without `method`; `train.steps` is required (checkpoints and
               step-count search ranges depend on it)
  methods:     {label: {method: <registry name>, <hyperparameter>: value, ...}}; values given here
               are fixed in every draw
  n_draws:     hyperparameter draws per method (default 3); draw 0 is the defaults (base's lr and
               weight decay, the objective's declared defaults), draw k > 0 samples `search` and
               the objective's declared ranges with a generator seeded by (k, objective)
               (`objectives.search.draw_hparams`), the same draw for every trial seed
  seeds:       trial seeds (default [0]); each sets train.seed (and a method's own `seed`)
  search:      optimizer ranges of draws k > 0 (default lr [log, 1e-4, 1e-2], weight_decay
               [log, 1e-6, 1e-2]; rules as `HParam.search`)
  checkpoint_every: evaluate a checkpoint every N steps and the last (default train.steps // 4)
  holdout_fraction: held-out part of every environment (default 0.2, DomainBed's): validation
               records of the training environments (a benchmark's own `val` split where it has
               one) and the oracle's part of each test environment (`data.carve.hold_out`)
  test_envs:   test environments (default: every out-of-domain environment)
  metric:      the accuracy, a per-example metric (default exact)
  headline_env: the environment the report leads with (e.g. the colour-free one)
  reference:   {name: <packaged reference, e.g. domainbed_coloredmnist>, env: <our environment
               its figures are compared with>}: published figures printed beside ours
  launcher:    {kind: local | multi-gpu | slurm, ...} (see `workflows.launchers`)

Layout of OUT: runs/<label>/draw-<d>/seed-<s>/{train/, eval/step-N/{val,test}/, scores.json},
runs.jsonl (one row per evaluated checkpoint), results.json, report.md, report.html and PNGs.
Every run's train folder is claimed through `robustvlm.runs` with resume on, before any job
starts, so a run folder made with other settings is an error naming the keys. A run is finished
when its scores.json exists: re-running the command (after a kill, or after some runs failed)
trains and evaluates only the runs without one, and an interrupted run resumes from its last
checkpoint.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from robustvlm.analysis.selection import (
    CheckpointScores,
    SweepResults,
    colour_rule_prototypes,
    oracle_rule_calls,
    rule_calls,
    select_sweep,
)
from robustvlm.analysis.summary import EvalMetrics
from robustvlm.config import RunConfig, deep_merge, validate_config
from robustvlm.data.from_config import load_from_config
from robustvlm.errors import ConfigError
from robustvlm.evaluation.metrics.registry import per_batch_metrics
from robustvlm.objectives.search import draw_hparams
from robustvlm.report.sweep_report import write_sweep_report
from robustvlm.runs import claim_run_folder, lock_run_folder, make_output_folder, write_jsonl
from robustvlm.training.checkpoint import WEIGHTS_FILE, list_checkpoints
from robustvlm.training.finetune import export_checkpoint
from robustvlm.workflows.finetune.evaluate import METRICS_FILE, evaluate
from robustvlm.workflows.finetune.study import read_methods_config, seeded_args
from robustvlm.workflows.finetune.study_dry_run import cap_warmups, shrink_sections
from robustvlm.workflows.finetune.train import train
from robustvlm.workflows.launchers import LAUNCHERS, JobRunnerConfig, run_jobs
from robustvlm.workflows.plan_configs import ReferenceEntry, SweepConfig

DEFAULT_SEARCH = {"lr": ("log", 1e-4, 1e-2), "weight_decay": ("log", 1e-6, 1e-2)}
SEARCH_KINDS = ("log", "int_log", "uniform", "choice")
SCORES_FILE = "scores.json"
DRY_TRAIN = {"steps": 4, "cpu_threads": 1, "bf16": "auto", "grad_accum": 1}
DRY_EVAL = {"max_new_tokens": 8, "max_per_env": 4, "batch_size": 8}


# ---------------------------------------------------------------- configuration


@dataclass(frozen=True)
class SweepJob:
    """One run of a sweep: (method label, draw, trial seed), its run config and folder."""

    label: str
    draw: int
    seed: int
    cfg: RunConfig
    run_dir: str
    metric: str
    progress: bool = False


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep: its jobs and how to select and report them."""

    jobs: list[SweepJob]
    methods: dict[str, str]
    draws: dict[str, dict[int, dict]]
    seeds: list[int]
    checkpoints: list[int]
    holdout_fraction: float
    test_envs: list[str] | None
    metric: str
    headline_env: str | None
    reference: dict | None
    launcher: JobRunnerConfig
    dry_run: bool


def dry_run_spec(spec: Mapping) -> dict:
    """The dry-run stand-in of a sweep: a tiny offline model, a built-in benchmark at 8 records per
    environment (the configured one, else `spurious`), 4 steps with a checkpoint every 2, warm-ups
    (`k_skip`, `anneal_steps`) cut to 2 steps, at most 2 draws, the first seed, 4 evaluated
    records per environment, in this process."""
    out = copy.deepcopy(dict(spec))
    out["launcher"] = {"kind": "local"}
    base = out.get("base")
    if isinstance(base, dict):
        data = base.get("data") or {}
        if data.get("benchmark") is None:
            out.pop("test_envs", None)
            out.pop("headline_env", None)
        shrink_sections(base, DRY_TRAIN, DRY_EVAL)
        base["data"] = {
            "benchmark": data.get("benchmark") or "spurious",
            "n_per_env": 8,
            "seed": data.get("seed", 0),
        }
    out["checkpoint_every"] = 2
    if isinstance(out.get("n_draws"), int):
        out["n_draws"] = min(out["n_draws"], 2)
    if isinstance(out.get("seeds"), list) and out["seeds"]:
        out["seeds"] = out["seeds"][:1]
    cap_warmups(out.get("methods"))  # every penalty on within the 4 steps
    return out


def _search(search: Mapping[str, Any], source: str) -> dict[str, tuple]:
    """The optimizer search rules of draws k > 0 (`search:`), each checked."""
    out = {}
    for key, rule in search.items():
        if key not in ("lr", "weight_decay"):
            raise ConfigError(
                f"{source}: search.{key}: only lr and weight_decay are searched here; "
                "method hyperparameters use their objective's declared ranges"
            )
        if (
            not isinstance(rule, list | tuple)
            or len(rule) < 2
            or rule[0] not in SEARCH_KINDS
            or (
                rule[0] != "choice"
                and (len(rule) != 3 or not all(isinstance(v, int | float) for v in rule[1:]))
            )
        ):
            raise ConfigError(
                f"{source}: search.{key}: a rule [log|int_log|uniform, lo, hi] or "
                f"[choice, v1, ...] is required (got {rule!r})"
            )
        out[key] = tuple(rule)
    return out


def load_reference(entry: ReferenceEntry | None, source: str) -> dict | None:
    """The packaged published figures a sweep prints beside its own (`reference:`), or None."""
    if entry is None:
        return None
    path = resources.files("robustvlm.configs").joinpath("reference", f"{entry.name}.yaml")
    if not path.is_file():
        raise ConfigError(f"{source}: reference.name: no packaged reference {entry.name!r}")
    ref = yaml.safe_load(path.read_text("utf-8"))
    return {**ref, "ours_env": entry.env}


def sweep_plan(
    config: str | Path | Mapping,
    out_dir: str | Path,
    *,
    dry_run: bool = False,
    launcher: str | None = None,
    progress: bool = True,
) -> SweepPlan:
    """Validate a sweep config into its jobs (see the module doc); ConfigError names the key."""
    cfg, source = read_methods_config(config, "sweep config", SweepConfig, dry_run_spec, dry_run=dry_run)
    base = cfg.base
    base_cfg: RunConfig = validate_config(deep_merge(base, {}), f"{source} (base)")
    steps = base_cfg.train.steps
    if steps is None:
        raise ConfigError(f"{source}: base.train.steps: a sweep needs a fixed number of steps")
    n_draws, seeds, holdout = cfg.n_draws, cfg.seeds, cfg.holdout_fraction
    every = cfg.checkpoint_every or max(1, steps // 4)
    checkpoints = sorted({*range(every, steps + 1, every), steps})
    metric = cfg.metric
    per_batch = [m.name for m in per_batch_metrics()]
    if metric not in per_batch:
        raise ConfigError(
            f"{source}: metric: {metric!r} is not a per-example accuracy; choose one of {per_batch}"
        )
    test_envs, headline = cfg.test_envs, cfg.headline_env
    launch = cfg.launcher
    if launcher is not None:
        if launcher not in LAUNCHERS:
            raise ConfigError(f"--launcher: choose one of {list(LAUNCHERS)}")
        launch = launch.model_copy(update={"kind": launcher})
    search = _search(DEFAULT_SEARCH if cfg.search is None else cfg.search, source)
    reference = load_reference(cfg.reference, source)

    out_dir = Path(out_dir)
    jobs: list[SweepJob] = []
    objectives: dict[str, str] = {}
    draws: dict[str, dict[int, dict]] = {}
    for label, entry in cfg.methods.items():
        name, fixed = entry.method, entry.args
        objectives[label] = name
        draws[label] = {}
        for draw in range(n_draws):
            drawn = draw_hparams(
                name,
                draw,
                steps=steps,
                optimizer_defaults={
                    "lr": base_cfg.train.lr,
                    "weight_decay": base_cfg.train.weight_decay,
                },
                optimizer_search=search,
            )
            args = {**drawn["method_args"], **fixed}
            draws[label][draw] = {
                "lr": drawn["lr"],
                "weight_decay": drawn["weight_decay"],
                "method_args": args,
            }
            for seed in seeds:
                raw = deep_merge(
                    base,
                    {
                        "method": name,
                        "method_args": seeded_args(name, args, seed),
                        "data": {"holdout_fraction": float(holdout)},
                        "train": {
                            "seed": seed,
                            "lr": drawn["lr"],
                            "weight_decay": drawn["weight_decay"],
                            "save_every": every,
                            "keep_checkpoints": len(checkpoints),
                        },
                    },
                )
                run_cfg = validate_config(raw, f"{source} (methods.{label}, draw {draw}, seed {seed})")
                run_dir = out_dir / "runs" / str(label) / f"draw-{draw}" / f"seed-{seed}"
                jobs.append(
                    SweepJob(
                        str(label),
                        draw,
                        seed,
                        run_cfg,
                        str(run_dir),
                        metric,
                        progress and launch.kind == "local" and (launch.workers or 1) == 1,
                    )
                )
    return SweepPlan(
        jobs,
        objectives,
        draws,
        seeds,
        checkpoints,
        float(holdout),
        test_envs,
        metric,
        headline,
        reference,
        launch,
        dry_run,
    )


# ---------------------------------------------------------------- one run


def _env_means(metrics: EvalMetrics, metric: str) -> dict[str, float]:
    return {
        env: float(v.scores[metric])
        for env, v in metrics.per_env.items()
        if v.scores.get(metric) is not None
    }


def run_sweep_job(job: SweepJob) -> dict:
    """Train one run (resuming), evaluate each kept checkpoint on the held-out (`val`) and reported
    (`test`) parts of every environment, and write scores.json; a finished run is read back.

    Returns {"checkpoints": [CheckpointScores dicts], "train_envs", "ood_envs"}.
    """
    run_dir = Path(job.run_dir)
    scores_path = run_dir / SCORES_FILE
    if scores_path.is_file():
        return json.loads(scores_path.read_text(encoding="utf-8"))
    if job.progress:
        print(f"\n=== {job.label}, draw {job.draw}, seed {job.seed} ===")
    result = train(job.cfg, run_dir / "train", resume=True, progress=job.progress)
    examples = load_from_config(job.cfg.data, run_dir / "train", verbose=False)
    rows = []
    for checkpoint in list_checkpoints(run_dir / "train"):
        step = int(checkpoint.name.split("-")[1])
        last = step == result.steps
        if not last and not (checkpoint / WEIGHTS_FILE).is_file():
            continue  # sharded (DeepSpeed / FSDP): only the final model can be evaluated
        model_dir = result.final_dir if last else run_dir / "models" / checkpoint.name
        if (
            not last
            and not (run_dir / "eval" / checkpoint.name / "test" / METRICS_FILE).is_file()
        ):
            export_checkpoint(job.cfg, run_dir / "train", checkpoint, model_dir)
        parts = {}
        for split in ("val", "test"):
            metrics = evaluate(
                model_dir,
                examples,
                run_dir / "eval" / checkpoint.name / split,
                cfg=job.cfg.eval.model_copy(update={"split": split}),
                resume=True,
                progress=False,
            )
            parts[split] = _env_means(metrics, job.metric)
        if not last:
            shutil.rmtree(model_dir, ignore_errors=True)
        rows.append(
            CheckpointScores(
                job.label, job.draw, job.seed, step, parts["val"], parts["test"]
            ).to_dict()
        )
    shutil.rmtree(run_dir / "models", ignore_errors=True)
    done = {
        "checkpoints": rows,
        "train_envs": sorted({ex.env for ex in examples if not ex.ood}),
        "ood_envs": sorted({ex.env for ex in examples if ex.ood}),
    }
    tmp = scores_path.with_name(SCORES_FILE + ".tmp")
    tmp.write_text(json.dumps(done, indent=1), encoding="utf-8")
    tmp.replace(scores_path)
    # finished: the run is never trained again, so its resume checkpoints go (final/ stays)
    shutil.rmtree(run_dir / "train" / "checkpoints", ignore_errors=True)
    return done


# ---------------------------------------------------------------- the sweep


def _prototypes(run_dir: Path) -> dict[str, dict[str, float]]:
    """Colour-rule accuracies per environment, from a built-in benchmark's manifest ({} if none)."""
    manifest = run_dir / "train" / "data" / "manifest.json"
    if not manifest.is_file():
        return {}
    info = json.loads(manifest.read_text(encoding="utf-8"))
    if "colour_agreement" not in info or "label_noise" not in info:
        return {}
    return colour_rule_prototypes(info["colour_agreement"], info["label_noise"])


def _finished(job: SweepJob) -> bool:
    """A run is finished when its scores.json exists."""
    return (Path(job.run_dir) / SCORES_FILE).is_file()


def run_sweep(
    config: str | Path | Mapping,
    out_dir: str | Path,
    *,
    launcher: str | None = None,
    dry_run: bool = False,
    progress: bool = True,
) -> SweepResults:
    """Run every pending job of a sweep, select, write runs.jsonl, results.json and the report."""
    out_dir = Path(out_dir)
    plan = sweep_plan(config, out_dir, dry_run=dry_run, launcher=launcher, progress=progress)
    make_output_folder(out_dir)
    lock_run_folder(out_dir)  # one writer at a time; each run's folder is claimed on its own
    for job in plan.jobs:  # refuse a folder made with other settings before anything runs
        claim_run_folder(Path(job.run_dir) / "train", job.cfg, command="train", resume=True, write=False)
    pending = [j for j in plan.jobs if not _finished(j)]
    if progress:
        print(
            f"sweep: {len(plan.jobs)} runs, {len(plan.jobs) - len(pending)} finished, "
            f"{len(pending)} to run ({plan.launcher.kind} launcher)"
        )
    run_jobs(
        run_sweep_job,
        plan.jobs,
        plan.launcher,
        out_dir / "launcher",
        name=lambda j: f"{j.label} draw {j.draw} seed {j.seed}",
        done=_finished,
        desc="runs",
        progress=progress,
    )
    done = [
        json.loads((Path(j.run_dir) / SCORES_FILE).read_text(encoding="utf-8")) for j in plan.jobs
    ]
    train_envs, ood_envs = done[0]["train_envs"], done[0]["ood_envs"]
    test_envs = plan.test_envs or ood_envs
    bad = sorted(set(test_envs) - set(ood_envs))
    if bad:
        raise ConfigError(
            f"test_envs: {bad} are not out-of-domain environments of the data ({ood_envs})"
        )
    if plan.headline_env is not None and plan.headline_env not in test_envs:
        raise ConfigError(
            f"headline_env: {plan.headline_env!r} is not a test environment ({test_envs})"
        )
    rows = [CheckpointScores.from_dict(r) for d in done for r in d["checkpoints"]]
    write_jsonl(
        out_dir / "runs.jsonl",
        [{**r.to_dict(), "hparams": plan.draws[r.method][r.draw]} for r in rows],
    )
    selection = select_sweep(rows, train_envs, test_envs)
    prototypes = _prototypes(Path(plan.jobs[0].run_dir))
    results = SweepResults(
        methods=plan.methods,
        draws=plan.draws,
        seeds=plan.seeds,
        checkpoints=plan.checkpoints,
        train_envs=train_envs,
        test_envs=list(test_envs),
        metric=plan.metric,
        holdout_fraction=plan.holdout_fraction,
        selection=selection,
        rules=rule_calls(selection, prototypes),
        oracle_rules=oracle_rule_calls(selection, prototypes),
        headline_env=plan.headline_env,
        reference=plan.reference,
        n_runs=len(plan.jobs),
        dry_run=plan.dry_run,
    )
    (out_dir / "results.json").write_text(json.dumps(results.to_dict(), indent=2), encoding="utf-8")
    write_sweep_report(results, out_dir)
    if progress:
        print(f"report: {(out_dir / 'report.md').absolute()} and {(out_dir / 'report.html').absolute()}")
    return results
