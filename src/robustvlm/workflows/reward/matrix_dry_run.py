"""`robustvlm rm matrix CONFIG --dry-run`: the matrix's plan, printed, with nothing trained.

The plan is the validated config expanded into its runs (loss label x seed x training
environment), each with its own config (the environment's `per_env` overrides applied): loss,
model, trainable parts, steps, batch and folder (`workflows.run_plan`); then the data, the
evaluation, the budget and the parallel jobs. The data is not read: the training environments are
`train_envs`, else the names of `data.sources`; where neither names them (one path or a built-in
benchmark), a row stands for one run per environment with training pairs, found when the matrix
runs. To run the same recipe for real at a tiny size, use `--smoke`.
"""

from __future__ import annotations

from pathlib import Path

from robustvlm.config import PreferenceDataConfig, RewardConfig
from robustvlm.workflows.reward.matrix import MatrixPlan, run_folder
from robustvlm.workflows.run_plan import (
    NOTHING_TRAINED,
    PlannedRun,
    budget_line,
    data_text,
    run_table,
)

EVERY_ENV = "<each env>"


def _data(data: PreferenceDataConfig) -> str:
    if data.sources:
        return ", ".join(f"{name}: {source.path}" for name, source in data.sources.items())
    return data_text(data)


def _eval(cfg: RewardConfig) -> str:
    cap = "all" if cfg.eval.max_per_env is None else str(cfg.eval.max_per_env)
    return (f"pairwise accuracy on {cap} {cfg.eval.split} pairs of every environment"
            + (", with the text-only test" if cfg.eval.text_only_test else ""))


def matrix_plan_lines(plan: MatrixPlan, out: Path) -> list[str]:
    """The printed plan of `plan`; `out` is where the matrix would write."""
    first = plan.run_config(next(iter(plan.losses)), plan.seeds[0], "_")
    envs = plan.train_envs or list(first.data.sources) or [EVERY_ENV]
    runs = []
    for label in plan.losses:
        for seed in plan.seeds:
            for env in envs:
                cfg = plan.run_config(label, seed, env)
                runs.append(PlannedRun((label, seed, env), cfg.loss, cfg.model, cfg.train,
                                       run_folder(out, label, seed, env)))
    known = envs != [EVERY_ENV]
    shape = f"{len(plan.losses)} losses x {len(plan.seeds)} seeds x " + (
        f"{len(envs)} training environments" if known else "1, per training environment")
    return [*run_table(("label", "seed", "env"), runs), "",
            f"data: {_data(first.data)}",
            "training environments: " + (", ".join(envs) if known else
                                         "every one with training pairs, found when the data is read"),
            f"evaluation: {_eval(first)}",
            budget_line(runs, shape),
            f"text-only models: {plan.text_only or 'none'}",
            f"jobs: {plan.jobs} at a time",
            NOTHING_TRAINED]
