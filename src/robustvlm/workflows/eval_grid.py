"""`robustvlm grid CONFIG.yaml`: models x benchmarks x shards of `mc eval` or `eval` from one YAML
(`workflows.grid_config`), each cell a `--shard I/N` run in its own folder, run through a launcher
(`workflows.launchers`: `local` workers, a `multi-gpu` pool, `slurm` arrays); then the shards of
each (model, benchmark) joined by `robustvlm merge` (`workflows.merge`) into what one run writes.

Layout of OUT (claimed as the grid's run folder: re-running with other models, benchmarks, shards
or options is refused; the launcher may change):
  <model>/<benchmark>/shard-<i>-of-<n>/   the cell's run folder (its --out)
  <model>/<benchmark>/shard-<i>-of-<n>.log   its output; .done once it finished
  <model>/<benchmark>/merged/             the merged run; merged.done once written
  grid.json                               {model: {benchmark: merged folder}} of the finished grid

Every cell and merge is a `robustvlm` command run as a subprocess of the job (so a pool worker, a
GPU worker seeing its own GPU, or a SLURM task runs it as a user would), from the folder the grid
was started in; a cell that sees a GPU is launched by torchrun as one process, which puts its
model on that GPU (`command_of`). Resumable: a cell or merge with its .done marker is skipped; a cell killed
mid-run is run again with `--resume` (every cell is) and keeps the rows it wrote; a merge killed
mid-way is redone from an empty folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from robustvlm.config import read_yaml_mapping, validate_config
from robustvlm.errors import RobustVLMError
from robustvlm.runs import claim_run_folder
from robustvlm.workflows.grid_config import DATA_OPTION, GridConfig
from robustvlm.workflows.launchers import run_jobs

MERGED = "merged"
SUMMARY_FILE = "grid.json"


@dataclass(frozen=True)
class Job:
    """One `robustvlm` command of the grid: a cell (`--shard I/N` run) or a merge."""

    name: str  # "tiny:clip x digits shard 0/2", "tiny:clip x digits merge"
    argv: tuple[str, ...]  # robustvlm's words
    folder: Path  # the run folder it writes (its --out)
    cwd: Path  # where it runs (relative paths of the config are read from here)

    @property
    def marker(self) -> Path:
        return self.folder.with_name(self.folder.name + ".done")

    @property
    def log(self) -> Path:
        return self.folder.with_name(self.folder.name + ".log")

    def done(self) -> bool:
        return self.marker.is_file()


@dataclass(frozen=True)
class GridPlan:
    """The cells and merges of a grid, in order (model, benchmark, shard)."""

    config: GridConfig
    source: str
    out: Path
    cells: list[Job]
    merges: list[Job]
    merged: dict[str, dict[str, Path]]  # {model: {benchmark: merged folder}}


def read_grid_config(config: str | Path) -> GridConfig:
    """The validated grid config of a YAML file (ConfigError naming every bad key)."""
    return validate_config(read_yaml_mapping(config, "grid config", ", ".join(GridConfig.model_fields)),
                           str(config), GridConfig)


def grid_plan(config: str | Path, out: Path, *, launcher: str | None = None) -> GridPlan:
    """The plan of the grid in `config` written under `out`; `launcher` overrides launcher.kind."""
    cfg = read_grid_config(config)
    if launcher is not None:
        cfg = cfg.model_copy(update={"launcher": cfg.launcher.model_copy(update={"kind": launcher})})
    out, cwd = out.absolute(), Path.cwd()
    n = cfg.shards
    cells: list[Job] = []
    merges: list[Job] = []
    merged: dict[str, dict[str, Path]] = {}
    for model_label, model in cfg.labelled("models").items():
        for bench_label, bench in cfg.labelled("benchmarks").items():
            place = out / model_label / bench_label
            pair = f"{model} x {bench_label}"
            shards = [place / f"shard-{i}-of-{n}" for i in range(n)]
            for i, folder in enumerate(shards):
                argv = (*cfg.command.split(), "--model", model, DATA_OPTION[cfg.command], bench, "--out", str(folder),
                        "--shard", f"{i}/{n}", "--resume", *cfg.option_words())
                cells.append(Job(f"{pair} shard {i}/{n}", argv, folder, cwd))
            merges.append(Job(f"{pair} merge", ("merge", *map(str, shards), "--out", str(place / MERGED)),
                              place / MERGED, cwd))
            merged.setdefault(model_label, {})[bench_label] = place / MERGED
    return GridPlan(cfg, str(config), out, cells, merges, merged)


def grid_plan_lines(plan: GridPlan) -> list[str]:
    """What `grid --dry-run` prints: the size, the launcher, and every command with its state."""
    cfg = plan.config
    n_models, n_benches = len(cfg.labelled("models")), len(cfg.labelled("benchmarks"))
    lines = [f"grid {plan.source}: {cfg.command}, {n_models} model(s) x {n_benches} benchmark(s) x {cfg.shards} "
             f"shard(s) = {len(plan.cells)} cells, then {len(plan.merges)} merges; launcher {cfg.launcher.kind}; "
             f"into {plan.out}"]
    for title, jobs in (("cells", plan.cells), ("merges", plan.merges)):
        todo = [j for j in jobs if not j.done()]
        lines.append(f"{title}: {len(jobs) - len(todo)} done, {len(todo)} to run")
        lines += [f"  {'done ' if j.done() else 'to run'}  robustvlm {' '.join(j.argv)}" for j in jobs]
    return lines


def command_of(job: Job) -> list[str]:
    """The process a job runs: `python -m robustvlm.cli ARGV`; a cell whose process sees a GPU
    (a `multi-gpu` worker sees its own) runs under `torchrun --nproc_per_node 1`, so that its model
    goes on that GPU (`sharding.place_model`; without a launcher it would stay on the CPU)."""
    import torch

    program = [sys.executable, "-m", "robustvlm.cli"]
    if job.argv[0] != "merge" and torch.cuda.is_available():
        program[1:1] = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]
    return [*program, *job.argv]


def run_job(job: Job) -> None:
    """Run one grid command as a subprocess (its output in its .log); the .done marker once it
    succeeded; RobustVLMError naming the job and the last line it printed otherwise. A merge
    starts from an empty folder (one a killed merge left is removed first)."""
    if job.argv[0] == "merge" and job.folder.exists():
        shutil.rmtree(job.folder)
    job.log.parent.mkdir(parents=True, exist_ok=True)
    with job.log.open("w", encoding="utf-8") as log:
        status = subprocess.run(command_of(job), cwd=job.cwd, env=os.environ.copy(),
                                stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if status != 0:
        lines = job.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        raise RobustVLMError(f"exit status {status}: {lines[-1] if lines else 'no output'} (log: {job.log})")
    job.marker.write_text(json.dumps({"argv": list(job.argv)}) + "\n", encoding="utf-8")


def run_grid(config: str | Path, out: Path, *, launcher: str | None = None) -> GridPlan:
    """Claim OUT, run the cells not done, then the merges not done (through the config's
    launcher), and write grid.json; returns the plan."""
    plan = grid_plan(config, out, launcher=launcher)
    claim_run_folder(plan.out, plan.config, command="grid", resume=True, may_differ=("launcher",))
    for jobs, desc in ((plan.cells, "cells"), (plan.merges, "merges")):
        run_jobs(run_job, jobs, plan.config.launcher, plan.out / "launcher", name=lambda j: j.name,
                 done=Job.done, desc=desc)
    summary = {m: {b: str(folder.relative_to(plan.out)) for b, folder in benches.items()}
               for m, benches in plan.merged.items()}
    (plan.out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return plan
