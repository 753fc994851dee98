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
  headline_env: the environment the report leads with (e.g. the colour-free one); it and
               `test_envs` are checked against the data's environments while planning, before
               any run starts
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

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

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
from robustvlm.config import DataConfig, RunConfig, TrainConfig, deep_merge, validate_config
from robustvlm.data.from_config import load_from_config
from robustvlm.errors import ConfigError
from robustvlm.machine import write_results_json
from robustvlm.model_ref import ModelRef
from robustvlm.objectives.search import draw_hparams
from robustvlm.report.sweep_report import write_sweep_report
from robustvlm.runs import claim_run_folder, lock_run_folder, make_output_folder, write_jsonl
from robustvlm.training.checkpoint import WEIGHTS_FILE, list_checkpoints
from robustvlm.training.finetune import export_checkpoint
from robustvlm.workflows.finetune.evaluate import METRICS_FILE, evaluate
from robustvlm.workflows.finetune.study import read_methods_config, seeded_args
from robustvlm.workflows.finetune.sweep_smoke import smoke_spec
from robustvlm.workflows.finetune.train import train
from robustvlm.workflows.launchers import LAUNCHERS, JobRunnerConfig, run_jobs
from robustvlm.workflows.plan_configs import MethodEntry, ReferenceEntry, SweepConfig

DEFAULT_SEARCH = {"lr": ("log", 1e-4, 1e-2), "weight_decay": ("log", 1e-6, 1e-2)}
SCORES_FILE = "scores.json"


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
    smoke: bool


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
    smoke: bool = False,
    launcher: str | None = None,
    progress: bool = True,
    check_envs: bool = True,
) -> SweepPlan:
    """Validate a sweep config into its jobs (see the module doc); ConfigError names the key.

    Every check runs here, before any job: the config's own (`plan_configs.SweepConfig`), each
    run's config, and (with `check_envs`, which reads the data) `test_envs` / `headline_env`
    against the data's environments."""
    cfg, source = read_methods_config(config, "sweep config", SweepConfig, smoke_spec, smoke=smoke)
    base_cfg: RunConfig = validate_config(deep_merge(cfg.base, {}), f"{source} (base)")
    steps = base_cfg.train.steps
    if steps is None:
        raise ConfigError(f"{source}: base.train.steps: a sweep needs a fixed number of steps")
    every = cfg.checkpoint_every or max(1, steps // 4)
    checkpoints = sorted({*range(every, steps + 1, every), steps})
    launch = _launcher(cfg.launcher, launcher)
    search = DEFAULT_SEARCH if cfg.search is None else cfg.search
    reference = load_reference(cfg.reference, source)
    draws = {
        label: {draw: _draw(entry, draw, steps, base_cfg.train, search) for draw in range(cfg.n_draws)}
        for label, entry in cfg.methods.items()
    }
    schedule = {"save_every": every, "keep_checkpoints": len(checkpoints)}
    jobs = [
        SweepJob(
            label=str(label),
            draw=draw,
            seed=seed,
            cfg=_run_config(
                cfg, label, hparams, seed, schedule, f"{source} (methods.{label}, draw {draw}, seed {seed})"
            ),
            run_dir=str(Path(out_dir) / "runs" / str(label) / f"draw-{draw}" / f"seed-{seed}"),
            metric=cfg.metric,
            progress=progress and launch.kind == "local" and (launch.workers or 1) == 1,
        )
        for label, by_draw in draws.items()
        for draw, hparams in by_draw.items()
        for seed in cfg.seeds
    ]
    return SweepPlan(
        jobs=jobs,
        methods={label: entry.method for label, entry in cfg.methods.items()},
        draws=draws,
        seeds=cfg.seeds,
        checkpoints=checkpoints,
        holdout_fraction=float(cfg.holdout_fraction),
        test_envs=checked_test_envs(cfg, base_cfg.data, source) if check_envs else cfg.test_envs,
        metric=cfg.metric,
        headline_env=cfg.headline_env,
        reference=reference,
        launcher=launch,
        smoke=smoke,
    )


def _launcher(configured: JobRunnerConfig, kind: str | None) -> JobRunnerConfig:
    """The config's launcher, its kind replaced by `--launcher` when given."""
    if kind is None:
        return configured
    if kind not in LAUNCHERS:
        raise ConfigError(f"--launcher: choose one of {list(LAUNCHERS)}")
    return configured.model_copy(update={"kind": kind})


def _draw(
    entry: MethodEntry, draw: int, steps: int, train: TrainConfig, search: Mapping[str, tuple]
) -> dict:
    """Hyperparameter draw `draw` of a method entry: {lr, weight_decay, method_args}, the
    entry's fixed hyperparameters over the drawn ones."""
    drawn = draw_hparams(
        entry.method,
        draw,
        steps=steps,
        optimizer_defaults={"lr": train.lr, "weight_decay": train.weight_decay},
        optimizer_search=search,
    )
    return {
        "lr": drawn["lr"],
        "weight_decay": drawn["weight_decay"],
        "method_args": {**drawn["method_args"], **entry.args},
    }


def _run_config(
    cfg: SweepConfig, label: str, hparams: dict, seed: int, schedule: dict, where: str
) -> RunConfig:
    """The validated run config of one job: base with the draw's hyperparameters, the trial seed,
    the held-out fraction and the checkpoint schedule ({save_every, keep_checkpoints})."""
    name = cfg.methods[label].method
    raw = deep_merge(
        cfg.base,
        {
            "method": name,
            "method_args": seeded_args(name, hparams["method_args"], seed),
            "data": {"holdout_fraction": float(cfg.holdout_fraction)},
            "train": {"seed": seed, "lr": hparams["lr"], "weight_decay": hparams["weight_decay"], **schedule},
        },
    )
    return validate_config(raw, where)


def checked_test_envs(cfg: SweepConfig, data: DataConfig, source: str) -> list[str] | None:
    """`test_envs` (None: every out-of-domain environment), checked with `headline_env` against
    the environments of the data, which are loaded for it (a built-in benchmark synthesised into a
    temporary folder) only when either is set; ConfigError naming the key."""
    if cfg.test_envs is None and cfg.headline_env is None:
        return None
    with tempfile.TemporaryDirectory(prefix="robustvlm-sweep-") as work:
        ood_envs = sorted({ex.env for ex in load_from_config(data, Path(work), verbose=False) if ex.ood})
    test_envs = cfg.test_envs or ood_envs
    bad = sorted(set(test_envs) - set(ood_envs))
    if bad:
        raise ConfigError(
            f"{source}: test_envs: {bad} are not out-of-domain environments of the data ({ood_envs})"
        )
    if cfg.headline_env is not None and cfg.headline_env not in test_envs:
        raise ConfigError(
            f"{source}: headline_env: {cfg.headline_env!r} is not a test environment ({test_envs})"
        )
    return cfg.test_envs


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
    examples = result.examples  # as training loaded them
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
                ModelRef.folder(model_dir),
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
    smoke: bool = False,
    progress: bool = True,
) -> SweepResults:
    """Run every pending job of a sweep, select, write runs.jsonl, results.json and the report."""
    out_dir = Path(out_dir)
    plan = sweep_plan(config, out_dir, smoke=smoke, launcher=launcher, progress=progress)
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
    rows = [CheckpointScores.from_dict(r) for d in done for r in d["checkpoints"]]
    write_jsonl(
        out_dir / "runs.jsonl",
        [{**r.to_dict(), "hparams": plan.draws[r.method][r.draw]} for r in rows],
    )
    results = sweep_results(plan, rows, done[0]["train_envs"], plan.test_envs or done[0]["ood_envs"])
    write_results_json(out_dir, results.to_dict())
    write_sweep_report(results, out_dir)
    if progress:
        print(f"report: {(out_dir / 'report.md').absolute()} and {(out_dir / 'report.html').absolute()}")
    return results


def sweep_results(
    plan: SweepPlan, rows: list[CheckpointScores], train_envs: list[str], test_envs: list[str]
) -> SweepResults:
    """The sweep's results: DomainBed's selection of `rows` and the colour-rule analysis."""
    selection = select_sweep(rows, train_envs, test_envs)
    prototypes = _prototypes(Path(plan.jobs[0].run_dir))
    return SweepResults(
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
        smoke=plan.smoke,
    )
