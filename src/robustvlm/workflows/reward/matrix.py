"""`robustvlm rm matrix CONFIG.yaml`: generalization matrices of reward models.

Matrix config (YAML or dict):
  base:        a reward config without `loss` (model, data, train, eval)
  losses:      {label: {loss: <name>, <loss argument>: value, ...}}, e.g. standard, text_only,
               shortcut_aware side by side
  seeds:       [0, 1, 2]: each sets train.seed and, for tiny models, the initial weights
  train_envs:  environments to train on (default: every one with training pairs)
  per_env:     {env: {<base section>: {...}}}: overrides for the runs trained on env (e.g. the
               paper's global batch of 128 for RLHF-V against 256 elsewhere)
  text_only:   the label of the text-only models that SFD and the correlations compare with
               (default: the label whose loss is text_only)
  jobs:        runs trained side by side in worker processes, one torch thread each (default 1:
               one after another in this process), through the job runner (`workflows.launchers`)

Every (label, seed, training environment) trains on that environment's training pairs and is
scored on the test pairs of every environment. Layout of OUT: data/ (a built-in benchmark,
synthesised once), bases/seed-<s>/ (tiny models: one initial model per seed, shared by every
run of that seed, so the main branch and the text-only model start from the same weights),
runs/<label>/seed-<s>/<env>/{train.yaml,train/,eval/}, matrix.json, sfc.json (where the SFC
weights of each label trained with a proxy fell, read from its runs' logs: `logged_proxy`),
report.md, report.html and the PNGs. Re-running continues: finished runs are reused and interrupted ones resume, each
run folder's stored settings checked key by key (`robustvlm.runs`). `train.yaml` is the run's
whole config: a run too big to train in this process (an 8B backbone under DeepSpeed) can be
trained on its own with `accelerate launch ... rm train <run>/train.yaml --out <run>/train`,
and the next `rm matrix` reuses it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from robustvlm.analysis.reward import logged_sfc
from robustvlm.analysis.reward_matrix import (
    MatrixResults,
    MatrixRun,
    aggregate_matrix,
    gap_points,
    matrix_swap_checks,
)
from robustvlm.config import (
    ModelConfig,
    RewardConfig,
    deep_merge,
    read_yaml_mapping,
    validate_config,
)
from robustvlm.data.preferences import PreferencePair, load_pairs_from_config
from robustvlm.machine import with_machine
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.models.loading import save_tiny_base
from robustvlm.models.reward import is_reward_model
from robustvlm.report.reward_report import write_matrix_report
from robustvlm.reward.ladder_results import ProxyWeights, RunWeights
from robustvlm.reward.losses import loss_spec
from robustvlm.runs import claim_run_folder, read_jsonl, write_settings
from robustvlm.workflows.launchers import JobRunnerConfig, run_jobs
from robustvlm.workflows.plan_configs import MatrixConfig
from robustvlm.workflows.reward.evaluate import (
    PAIRS_FILE,
    eval_pairs,
    eval_views,
    evaluate_reward_model,
)
from robustvlm.workflows.reward.matrix_smoke import smoke_matrix_spec
from robustvlm.workflows.reward.train import train_reward_model

RESULTS_FILE = "matrix.json"
SFC_FILE = "sfc.json"
RUN_CONFIG = "train.yaml"


@dataclass(frozen=True)
class MatrixPlan:
    """A validated matrix config: {label: (loss, loss_args)}, seeds, the rest as given."""

    base: dict
    losses: dict[str, tuple[str, dict]]
    seeds: list[int]
    train_envs: list[str] | None
    per_env: dict[str, dict]
    text_only: str | None
    jobs: int

    def run_config(
        self, label: str, seed: int, env: str, *, data: Mapping | None = None, model: Mapping | None = None
    ) -> RewardConfig:
        """The config of one run: base and the env's overrides, the label's loss, the seed,
        training on `env` only; `data` replaces the base's data section and `model` updates the
        model section's keys (both before the env's overrides apply)."""
        loss, args = self.losses[label]
        raw = copy.deepcopy(self.base)
        if data is not None:
            raw["data"] = dict(data)
        if model is not None:
            raw["model"] = {**raw.get("model", {}), **model}
        raw = deep_merge(raw, self.per_env.get(env, {}))
        raw = deep_merge(raw, {"loss": loss, "loss_args": args, "train": {"seed": seed},
                               "data": {"envs": [env]}})
        return validate_config(raw, f"matrix run {label}/seed-{seed}/{env}", RewardConfig)


@dataclass(frozen=True)
class MatrixJob:
    """One run of the matrix: its label, seed, training environment, config and folder."""

    label: str
    seed: int
    env: str
    config: dict
    folder: Path


def matrix_plan(spec: Mapping) -> MatrixPlan:
    """Validate a matrix spec (`plan_configs.MatrixConfig`, see the module doc); ConfigError
    naming every bad key."""
    cfg = validate_config(copy.deepcopy(dict(spec)), "matrix config", MatrixConfig)
    losses = {label: (entry.loss, entry.args) for label, entry in cfg.losses.items()}
    text_only = cfg.text_only or next((lb for lb, (loss, _) in losses.items() if loss == "text_only"), None)
    seeds = cfg.seeds
    plan = MatrixPlan(cfg.base, losses, seeds, cfg.train_envs, dict(cfg.per_env), text_only, cfg.jobs)
    for label in losses:  # every run config must validate before anything trains
        plan.run_config(label, seeds[0], "_")
    return plan


def _prepare_data(plan: MatrixPlan, out: Path) -> tuple[list[PreferencePair], dict]:
    """All pairs, and the data section the runs read (a benchmark is synthesised once, in OUT)."""
    data = validate_config({**plan.base, "loss": "standard"}, "matrix base", RewardConfig).data
    pairs = load_pairs_from_config(data, out).pairs
    section = data.model_dump(mode="json", exclude_defaults=True)
    if data.benchmark is not None:
        section = {k: v for k, v in section.items() if k not in ("benchmark", "n_per_env")}
        section["path"] = str(out / "data")
    section.pop("envs", None)
    return pairs, section


def _base_model(plan: MatrixPlan, out: Path, seed: int, corpus: list[str]) -> dict | None:
    """Model keys for a seed's runs: a tiny model is built once per seed under OUT/bases (None
    for other models)."""
    model = validate_config(plan.base.get("model", {}), "model", ModelConfig)
    if model.ref.kind != TINY:
        return None
    folder = save_tiny_base(model.ref, out / "bases" / f"seed-{seed}",
                            tiny_options={**model.tiny, "seed": seed}, corpus=corpus)
    return {"name": str(folder), "tiny": {}}


def _train_and_score(job: MatrixJob, data: dict) -> None:
    """Train one run (reused when finished) and score it on the test pairs (resumable)."""
    cfg = RewardConfig.model_validate(job.config)
    final = job.folder / "train" / "final"
    if not is_reward_model(final):
        train_reward_model(cfg, job.folder / "train", resume=True, progress=False)
    pairs = load_pairs_from_config(cfg.data.model_copy(update={"envs": None}), job.folder, verbose=False).pairs
    evaluate_reward_model(ModelRef.folder(final), pairs, job.folder / "eval", cfg=cfg.eval, data=data, resume=True, progress=False)


@dataclass
class MatrixOutcome:
    """A finished matrix: its results, the o.o.d. points of the correlation scatter ({label:
    [(text-only gap, gap, test env)]}, first seed), and its runs with their scored test pairs
    (for pair-by-pair comparisons, `experiments.reward.paired`)."""

    results: MatrixResults
    points: dict[str, list[tuple[float, float, str]]]
    runs: list[MatrixRun]


def read_matrix_spec(spec: Mapping | str | Path, *, smoke: bool = False) -> dict:
    """A matrix spec from its YAML file or mapping (copied), or with `smoke` its tiny stand-in
    (`matrix_smoke`)."""
    raw = read_yaml_mapping(spec, "matrix config") if not isinstance(spec, Mapping) else dict(spec)
    return smoke_matrix_spec(raw) if smoke else raw


def run_folder(out: Path, label: str, seed: int, env: str) -> Path:
    """Where the run of `label` with `seed` trained on `env` lives: OUT/runs/<label>/seed-<s>/<env>."""
    return out / "runs" / label / f"seed-{seed}" / env


def run_matrix(spec: Mapping | str | Path, out_dir: str | Path, *, smoke: bool = False) -> MatrixOutcome:
    """Train and score every (label, seed, training environment), aggregate, write the report;
    with `smoke`, the matrix's tiny stand-in runs instead (`matrix_smoke`)."""
    raw = read_matrix_spec(spec, smoke=smoke)
    plan = matrix_plan(raw)
    out = Path(out_dir).absolute()
    claim_run_folder(out, raw, command="rm matrix", resume=True)
    pairs, data = _prepare_data(plan, out)
    train_envs = plan.train_envs or sorted({p.env for p in pairs if p.split == "train"})
    base_cfg = plan.run_config(next(iter(plan.losses)), plan.seeds[0], train_envs[0], data=data)
    tests = eval_pairs(pairs, base_cfg.eval)
    corpus = [t for p in pairs if p.split == "train" for t in (p.query, p.chosen, p.rejected)]
    jobs = [
        MatrixJob(label, seed, env, plan.run_config(label, seed, env, data=data, model=model).model_dump(mode="json"),
                  run_folder(out, label, seed, env))
        for seed in plan.seeds
        for model in [_base_model(plan, out, seed, corpus)]
        for label in plan.losses
        for env in train_envs
    ]
    for job in jobs:  # each run's config, for launching it on its own (e.g. under DeepSpeed)
        job.folder.mkdir(parents=True, exist_ok=True)
        write_settings(job.config, job.folder / RUN_CONFIG)
    run_jobs(partial(_train_and_score, data=data), jobs, JobRunnerConfig(workers=plan.jobs),
             name=lambda job: f"{job.label} seed {job.seed} trained on {job.env}", desc="runs")
    runs = [_matrix_run(job) for job in jobs]
    results = aggregate_matrix(runs, {p.id: (p.env, p.chosen, p.rejected) for p in tests},
                               proxy_label=plan.text_only)
    results.swap = matrix_swap_checks(runs)
    (out / RESULTS_FILE).write_text(json.dumps(with_machine(results.to_dict()), indent=2) + "\n", encoding="utf-8")
    sfc = {label: logged_proxy(out, label, plan.seeds, train_envs).to_dict()
           for label, (loss, _) in plan.losses.items() if loss_spec(loss).proxy}
    if sfc:
        (out / SFC_FILE).write_text(json.dumps(sfc, indent=2) + "\n", encoding="utf-8")
    points = scatter_points(runs, tests, plan.text_only)
    write_matrix_report(results, out, title="Reward-model generalization matrix", points=points)
    return MatrixOutcome(results, points, runs)


def logged_proxy(out: Path, label: str, seeds: list[int], envs: list[str]) -> ProxyWeights:
    """Where the SFC weights of `label`'s runs under OUT fell (`analysis.reward.logged_sfc` of
    their train_log.jsonl): per seed, pooled over `envs`, the proxy's logged training accuracy
    and the weights; `runs`: the same per run."""
    runs: list[RunWeights] = []
    proxy = ProxyWeights([], [], runs)
    for seed in seeds:
        logs = [read_jsonl(run_folder(out, label, seed, env) / "train" / "train_log.jsonl") for env in envs]
        summary = logged_sfc(logs)
        proxy.train_accuracy.append(summary["train_accuracy"])
        proxy.sfc.append(summary["sfc"])
        runs += [RunWeights(seed, env, logged_sfc([log])["sfc"]) for env, log in zip(envs, logs)]
    return proxy


def scatter_points(runs: list[MatrixRun], tests: list[PreferencePair], proxy_label: str | None) -> dict:
    """{label: o.o.d. (text-only gap, gap, test env) points of the first seed} for every label
    compared with the text-only models."""
    if proxy_label is None:
        return {}
    env_of = {p.id: p.env for p in tests}
    seed = min(r.seed for r in runs)
    labels = dict.fromkeys(r.label for r in runs if r.label != proxy_label)
    return {lb: gap_points(runs, env_of, label=lb, proxy_label=proxy_label, seed=seed) for lb in labels}


def _matrix_run(job: MatrixJob) -> MatrixRun:
    """A finished job's scored test pairs."""
    cfg = RewardConfig.model_validate(job.config)
    meta = json.loads((job.folder / "train" / "final" / "reward_model.json").read_text(encoding="utf-8"))
    views = eval_views(meta, cfg.eval)
    return MatrixRun(job.label, job.seed, job.env, read_jsonl(job.folder / "eval" / PAIRS_FILE),
                     views[0], views[1] if len(views) > 1 else None)
