"""`robustvlm demo invariance`: the linear unit tests of invariance, every objective, beside the paper.

The six problems of Aubin et al. (2021) (`data.synth.linear_unit_tests`) -> a linear model
trained with each of robustvlm's objectives (ERM, IRMv1, V-REx, GroupDRO, BIRM, Dynamic BIRM)
and the oracle (ERM on data whose spurious block is shuffled), in the closed forms of the
objective classes that train VLMs, every draw and data seed of an (example, method) at once
(`linear.batched`) -> random hyperparameter search, selection on the training environments'
validation error, several data seeds (`linear.protocol`) -> results.json, runs.jsonl (every
trained model), report.md and a self-contained report.html with the published ERM / IRMv1 /
ANDMask / IGA / Oracle figures beside ours (`experiments.invariance.report`); jobs/ keeps each job's models
as it finishes, so re-running an interrupted demo resumes.

A job is one (example, method) and up to SEEDS_PER_JOB data seeds, every draw; the jobs are
independent and seeded, so they are spread by the job runner (`workflows.launchers`: worker
processes with one torch thread each, or a SLURM array) and the result does not depend on how
they were scheduled. `budget` sets the sweep's size: "quick" (a smoke test), "default" (a few
CPU minutes per method, BIRM's and Dynamic BIRM's Monte-Carlo penalties about ten times that)
or "paper" (the authors' 20 draws x 50 data seeds, 10,000 rows and 10,000 steps: 42,000 models
in 546 jobs, for a cluster).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from functools import partial
from itertools import product
from pathlib import Path

import torch

from robustvlm.data.synth.linear_unit_tests import EXAMPLES
from robustvlm.errors import ConfigError
from robustvlm.experiments.invariance.report import write_invariance_report
from robustvlm.experiments.invariance.results import (
    InvarianceResults,
    LambdaExtremes,
    SpreadVerdict,
)
from robustvlm.linear.protocol import Protocol, Run, all_methods, linear_methods, run_cell, select
from robustvlm.linear.published import published_row, published_settings, spread_verdicts
from robustvlm.machine import write_results_json
from robustvlm.workflows.launchers import JobRunnerConfig, run_jobs

BUDGETS = {
    "quick": Protocol(n_per_env=80, n_eval_per_env=200, steps=40, n_draws=2, n_seeds=1, eiil_steps=200),
    "default": Protocol(n_per_env=1000, n_draws=8, n_seeds=4),
    "paper": Protocol(),
}
"""Sweep sizes: a smoke test; a few CPU minutes per method; the authors' sweep (`Protocol`'s
defaults). The default keeps the authors' 10,000 steps (ERM reads Example2's faint animal and
IRMv1 reaches the invariant rule on Example3 at 10 environments only after thousands of steps)
and takes 1,000 training rows, the first 8 of their 20 draws (their first 4 all have weight
decay below 5e-5, a corner of their 10^U(-6, -2) range) and 4 data seeds (on Example3 one seed
in a dozen leaves ERM near the invariant rule, so 2 seeds move the mean by a published std)."""
TRACED = ("dynamic_birm",)
"""Methods whose R_emp / R_inv / lambda are recorded over training (for the lambda plot)."""
TRACE_EVERY = 10
JOBS_DIR = "jobs"
"""Under OUT: every job's runs, kept by the job runner as the job ends, so an interrupted demo
re-run with the same settings trains only the jobs it had not finished."""

Job = tuple[str, str, int, int]  # example, method, draw, data seed
CellJob = tuple[str, str, int]  # example, method, first data seed: every draw, SEEDS_PER_JOB seeds
SEEDS_PER_JOB = 4
"""Data seeds trained together in one job (the default budget's 4: one job per example and method)."""


def cell_jobs(examples: tuple[str, ...], methods: tuple[str, ...], n_seeds: int) -> list[CellJob]:
    """The jobs of a sweep: every (example, method), its data seeds in chunks of SEEDS_PER_JOB."""
    return list(product(examples, methods, range(0, n_seeds, SEEDS_PER_JOB)))


def _run_cell_job(job: CellJob, protocol: Protocol) -> list[Run]:
    """Train one job's models, on one torch thread (the same arithmetic in any process)."""
    torch.set_num_threads(1)
    example, method, first = job
    seeds = list(range(first, min(first + SEEDS_PER_JOB, protocol.n_seeds)))
    trace = TRACE_EVERY if method in TRACED else 0
    return run_cell(example, method, list(range(protocol.n_draws)), seeds, protocol, trace_every=trace)


def train_models(
    cells: list[CellJob],
    protocol: Protocol,
    *,
    launcher: JobRunnerConfig,
    progress: bool = True,
    store: Path | None = None,
    folder: Path | None = None,
) -> dict[Job, Run]:
    """Train every job's models through the job runner with `launcher`; with `store`, each job's
    runs are kept there as it ends and read back by a re-run; `folder` holds a SLURM launcher's
    files. Returns the run of every (example, method, draw, data seed)."""
    runs = run_jobs(
        partial(_run_cell_job, protocol=protocol),
        cells,
        launcher,
        folder,
        name=lambda job: "/".join(map(str, job)),
        store=store,
        desc="cells",
        progress=progress,
    )
    return {(example, method, run.draw, run.seed): run for (example, method, _), cell in zip(cells, runs) for run in cell}


def run_invariance_demo(
    out_dir: str | Path,
    *,
    n_envs: int = 3,
    dim_inv: int = 5,
    dim_spu: int = 5,
    budget: str = "default",
    methods: tuple[str, ...] | None = None,
    launcher: JobRunnerConfig | None = None,
    progress: bool = True,
) -> InvarianceResults:
    """Run the sweep and write results.json, runs.jsonl, report.md, report.html and figures.

    Args:
        out_dir: output folder (created).
        n_envs, dim_inv, dim_spu: the problems' environments and dimensions; the published
            figures are shown where the authors ran the setting (`linear.published`).
        budget: one of BUDGETS ("quick" is a smoke test: too few draws and steps for the
            figures to mean much).
        methods: the methods to train (default `linear_methods()`: every registered objective and
            the oracle; `all_methods()` adds IRMv1 and Dynamic BIRM on environments inferred by EIIL).
        launcher: how the job runner runs the models (default: 2 local worker processes; 1,
            this one, for "quick", whose trainings take less time than starting a process).

    Returns:
        The results (results.json is its `to_dict`).
    """
    if budget not in BUDGETS:
        raise ConfigError(f"demo invariance: unknown budget {budget!r}; choose one of {list(BUDGETS)}")
    known = all_methods()
    methods = linear_methods() if methods is None else methods
    unknown = [m for m in methods if m not in known]
    if unknown or not methods:
        raise ConfigError(f"demo invariance: unknown methods {unknown}; choose among {list(known)}")
    methods = tuple(m for m in known if m in methods)
    protocol = replace(BUDGETS[budget], n_envs=n_envs, dim_inv=dim_inv, dim_spu=dim_spu)
    launcher = launcher or JobRunnerConfig(workers=1 if budget == "quick" else 2)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs = train_models(cell_jobs(EXAMPLES, methods, protocol.n_seeds), protocol, launcher=launcher,
                        progress=progress, store=out / JOBS_DIR, folder=out / "launcher")
    seconds = time.perf_counter() - t0
    write_runs(runs, out / "runs.jsonl")
    results = summarise(runs, methods, protocol, budget=budget, seconds=seconds, launcher=launcher)
    write_results_json(out, results.to_dict())
    md, html = write_invariance_report(results, runs, out)
    print(f"report: {md.absolute()} and {html.absolute()} ({seconds:.0f} s)")
    return results


def write_runs(runs: dict[Job, Run], path: Path) -> None:
    """runs.jsonl: every trained model, by example, method, draw and data seed."""
    with path.open("w", encoding="utf-8") as f:
        for (example, method, _, _), run in sorted(runs.items(), key=lambda item: _job_order(item[0])):
            f.write(json.dumps({"example": example, "method": method, **asdict(run)}) + "\n")


def _job_order(job: Job) -> tuple[int, int, int, int]:
    example, method, draw, seed = job
    return EXAMPLES.index(example), all_methods().index(method), draw, seed


def summarise(
    runs: dict[Job, Run], methods: tuple[str, ...], protocol: Protocol, *, budget: str, seconds: float,
    launcher: JobRunnerConfig,
) -> InvarianceResults:
    """The typed results of a finished sweep: every (example, method)'s selection, the lambda
    extremes, EIIL's purity and the published row of the setting with our figures against it."""
    cells: dict[tuple[str, str], list[Run]] = {}
    for (example, method, _, _), run in sorted(runs.items(), key=lambda item: _job_order(item[0])):
        cells.setdefault((example, method), []).append(run)
    selections = {example: {method: select(cells[example, method]) for method in methods} for example in EXAMPLES}
    row = published_row(protocol.n_envs, protocol.dim_inv, protocol.dim_spu)
    plain = {ex: {m: asdict(s) for m, s in by.items()} for ex, by in selections.items()}
    verdicts = None if row is None else {ex: {m: SpreadVerdict(**v) for m, v in by.items()}
                                         for ex, by in spread_verdicts(plain, row).items()}
    return InvarianceResults(
        budget=budget, seconds=round(seconds, 1), launcher=launcher.model_dump(), protocol=protocol,
        methods=list(methods), results=selections, lambdas=lambda_summary(runs), purity=purity_summary(runs),
        reference=row, within_spread=verdicts, published_settings=published_settings(),
    )


def purity_summary(runs: dict[Job, Run]) -> dict[str, float]:
    """Per example, the mean purity of EIIL's split against the given environments (over the
    data seeds; the split depends on the data seed only), where a method used it."""
    splits: dict[str, dict[int, float]] = {}
    for (example, _, _, seed), run in runs.items():
        if run.purity is not None:
            splits.setdefault(example, {})[seed] = run.purity
    return {example: sum(by_seed.values()) / len(by_seed) for example, by_seed in splits.items()}


def lambda_summary(runs: dict[Job, Run]) -> dict[str, LambdaExtremes]:
    """Per example, over the traced Dynamic BIRM runs: the largest lambda reached, and the smallest
    R_inv while lambda > 0 (None if the penalty was never on)."""
    out: dict[str, LambdaExtremes] = {}
    for (example, method, _, _), run in runs.items():
        if method not in TRACED or not run.trace:
            continue
        entry = out.get(example, LambdaExtremes())
        largest = max(entry.largest_lambda, *(r["lambda"] for r in run.trace))
        active = [r["R_inv"] for r in run.trace if r["lambda"] > 0]
        if entry.smallest_r_inv is not None:
            active.append(entry.smallest_r_inv)
        out[example] = LambdaExtremes(largest, min(active) if active else None)
    return out
