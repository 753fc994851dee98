"""`robustvlm study CONFIG --dry-run`: the study's plan, printed, with nothing trained.

The plan is the validated config expanded into its runs (method x seed): for each run its
method, model, trainable parts, data, training steps and batch, and evaluation; then the budget
(runs, optimisation steps, training examples seen) and where each run's folder will be. A run
whose `train.steps` is unset trains for `train.epochs` epochs of data not yet loaded, so its steps
read "epochs" instead of a number. To run the same recipe for real at a tiny size, use `--smoke`.
"""

from __future__ import annotations

from pathlib import Path

from robustvlm.config import RunConfig
from robustvlm.workflows.finetune.study import StudyPlan, run_dir_of


def _steps(cfg: RunConfig) -> str:
    return str(cfg.train.steps) if cfg.train.steps is not None else f"{cfg.train.epochs:g} epochs"


def _data(cfg: RunConfig) -> str:
    source = cfg.data.path or f"built-in {cfg.data.benchmark}"
    return source if cfg.data.n_per_env is None else f"{source} ({cfg.data.n_per_env} per environment)"


def _eval(cfg: RunConfig) -> str:
    cap = "all" if cfg.eval.max_per_env is None else str(cfg.eval.max_per_env)
    return f"{', '.join(cfg.eval.metrics)} on {cap} examples per environment"


def plan_lines(plan: StudyPlan, out_dir: Path) -> list[str]:
    """The printed plan of `plan` (runs then budget); `out_dir` is where the study would write."""
    lines = ["label\tseed\tmethod\tmodel\ttrainable\tsteps\tbatch\tfolder"]
    steps_total, examples_total, unknown = 0, 0, 0
    for label, by_seed in plan.runs.items():
        for seed, cfg in by_seed.items():
            batch = cfg.train.batch_size * cfg.train.grad_accum
            lines.append(f"{label}\t{seed}\t{cfg.method}\t{cfg.model.name}\t{cfg.model.trainable}\t"
                         f"{_steps(cfg)}\t{batch}\t{run_dir_of(out_dir, label, seed)}")
            if cfg.train.steps is None:
                unknown += 1
            else:
                steps_total += cfg.train.steps
                examples_total += cfg.train.steps * batch
    first = next(iter(next(iter(plan.runs.values())).values()))
    n_runs = sum(len(by_seed) for by_seed in plan.runs.values())
    budget = f"budget: {n_runs} runs ({len(plan.runs)} methods x {len(plan.seeds)} seeds), " \
             f"{steps_total:,} optimisation steps, {examples_total:,} training examples"
    lines += ["", f"data: {_data(first)}", f"evaluation: {_eval(first)}",
              budget + (f" (+ {unknown} runs counted in epochs)" if unknown else ""),
              "launcher: " + (f"accelerate launch --config_file {plan.launcher.accelerate_config}"
                              if plan.launcher else "this process"),
              "zero-shot row: " + ("yes" if plan.zero_shot else "no"),
              "dry run: nothing was trained; run without --dry-run to train (or --smoke for a tiny real run)"]
    return lines
