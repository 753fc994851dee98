"""`robustvlm sweep CONFIG --dry-run`: the sweep's plan, printed, with nothing trained.

The plan is the validated config expanded into its runs (method x draw x trial seed): each run's
objective, model, trainable parts, steps, batch and folder (`workflows.run_plan`); each draw's
hyperparameters; the evaluated checkpoints, the data, the budget and the launcher. The data is
not read, so `test_envs` and `headline_env` are checked against it only when the sweep runs. To
run the same sweep for real at a tiny size, use `--smoke`.
"""

from __future__ import annotations

from pathlib import Path

from robustvlm.workflows.finetune.sweep import SweepPlan
from robustvlm.workflows.run_plan import (
    NOTHING_TRAINED,
    PlannedRun,
    budget_line,
    data_text,
    run_table,
)


def _args_text(args: dict) -> str:
    """An objective's drawn arguments, floats to 3 significant digits ("defaults" when none)."""
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in args.items()) or "defaults"


def _draw_lines(plan: SweepPlan) -> list[str]:
    """One line per (method, draw): its learning rate, weight decay and objective arguments."""
    lines = ["label\tdraw\tlr\tweight_decay\tmethod_args"]
    for label, by_draw in plan.draws.items():
        lines += [f"{label}\t{draw}\t{hp['lr']:.3g}\t{hp['weight_decay']:.3g}\t{_args_text(hp['method_args'])}"
                  for draw, hp in by_draw.items()]
    return lines


def sweep_plan_lines(plan: SweepPlan) -> list[str]:
    """The printed plan of `plan`: runs, draws, then checkpoints, data, budget and launcher."""
    runs = [PlannedRun((job.label, job.draw, job.seed), job.cfg.method, job.cfg.model, job.cfg.train,
                       Path(job.run_dir))
            for job in plan.jobs]
    first = plan.jobs[0].cfg
    n_draws = len(next(iter(plan.draws.values())))
    launcher = plan.launcher.kind + (f", {plan.launcher.workers} workers" if plan.launcher.workers else "")
    return [*run_table(("label", "draw", "seed"), runs), "", *_draw_lines(plan), "",
            f"checkpoints evaluated: steps {plan.checkpoints}, on the held-out (val) and test parts",
            f"data: {data_text(first.data)}; held out: {100 * plan.holdout_fraction:.0f}% of each environment",
            f"test environments: {', '.join(plan.test_envs) if plan.test_envs else 'every out-of-domain one'}"
            + (f"; headline: {plan.headline_env}" if plan.headline_env else "")
            + " (checked against the data when the sweep runs)",
            budget_line(runs, f"{len(plan.methods)} methods x {n_draws} draws x {len(plan.seeds)} seeds"),
            f"launcher: {launcher}",
            NOTHING_TRAINED]
