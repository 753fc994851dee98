"""`robustvlm study CONFIG --dry-run`: the study's plan, printed, with nothing trained.

The plan is the validated config expanded into its runs (method x seed): for each run its
method, model, trainable parts, training steps and batch, and folder (`workflows.run_plan`); then
the data, the evaluation, the budget (runs, optimisation steps, training examples seen) and the
launcher. To run the same recipe for real at a tiny size, use `--smoke`.
"""

from __future__ import annotations

from pathlib import Path

from robustvlm.config import RunConfig
from robustvlm.workflows.finetune.study import StudyPlan, run_dir_of
from robustvlm.workflows.run_plan import (
    NOTHING_TRAINED,
    PlannedRun,
    budget_line,
    data_text,
    run_table,
)


def _eval(cfg: RunConfig) -> str:
    cap = "all" if cfg.eval.max_per_env is None else str(cfg.eval.max_per_env)
    return f"{', '.join(cfg.eval.metrics)} on {cap} examples per environment"


def plan_lines(plan: StudyPlan, out_dir: Path) -> list[str]:
    """The printed plan of `plan` (runs then budget); `out_dir` is where the study would write."""
    runs = [PlannedRun((label, seed), cfg.method, cfg.model, cfg.train, run_dir_of(out_dir, label, seed))
            for label, by_seed in plan.runs.items() for seed, cfg in by_seed.items()]
    first = next(iter(next(iter(plan.runs.values())).values()))
    return [*run_table(("label", "seed"), runs), "",
            f"data: {data_text(first.data)}", f"evaluation: {_eval(first)}",
            budget_line(runs, f"{len(plan.runs)} methods x {len(plan.seeds)} seeds"),
            "launcher: " + (f"accelerate launch --config_file {plan.launcher.accelerate_config}"
                            if plan.launcher else "this process"),
            "zero-shot row: " + ("yes" if plan.zero_shot else "no"),
            NOTHING_TRAINED]
