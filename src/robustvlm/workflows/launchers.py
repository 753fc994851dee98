"""Launchers: how a sweep runs its jobs, as DomainBed's `command_launchers` do.

A job is a picklable callable and its argument; a launcher runs every job and returns, per job,
its result or the exception it raised (so one failed run does not lose the others: finished runs
keep their outputs and a re-run of the sweep resumes).

- `local`: one after another in this process (exceptions stop the sweep at once, as a kill does);
- `multi-gpu`: a pool of worker processes (spawned), one per GPU, each seeing only its own GPU
  (`CUDA_VISIBLE_DEVICES`); `workers` sets the pool size where there is no GPU (CPU processes);
- `slurm`: one array job per sweep through submitit's `AutoExecutor` (`cluster: slurm`), whose
  `parameters` are submitit's (`slurm_partition`, `timeout_min`, `gpus_per_node`, `cpus_per_task`,
  ...); `cluster: local` runs the same jobs as local subprocesses (submitit's LocalExecutor) and
  `cluster: debug` in this process (submitit's DebugExecutor), to test a SLURM setup anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from robustvlm.errors import ConfigError

LAUNCHERS = ("local", "multi-gpu", "slurm")


class LauncherConfig(BaseModel):
    """`launcher:` of a sweep config (see the module doc)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "multi-gpu", "slurm"] = "local"
    workers: int | None = Field(
        None, ge=1, description="multi-gpu: processes (default one per GPU)"
    )
    gpus: list[int] | None = Field(None, description="multi-gpu: GPU indices (default all visible)")
    cluster: Literal["slurm", "local", "debug"] = "slurm"
    parameters: dict[str, Any] = Field(default_factory=dict, description="submitit parameters")


def run_jobs(
    fn: Callable[[Any], Any], jobs: Sequence[Any], cfg: LauncherConfig, folder: Path
) -> list[Any]:
    """Run `fn(job)` for every job with the launcher `cfg`; returns results (or exceptions) in
    job order. `folder` holds the launcher's own files (submitit's logs and pickles)."""
    if not jobs:
        return []
    if cfg.kind == "local":
        return [fn(job) for job in jobs]
    if cfg.kind == "multi-gpu":
        return _multi_gpu(fn, jobs, cfg)
    return _submitit(fn, jobs, cfg, folder)


# ---------------------------------------------------------------- multi-GPU pool


def _visible_gpus() -> list[int]:
    import torch

    return list(range(torch.cuda.device_count()))


def _pin_device(slots) -> None:
    """Pool initializer: take one GPU index from the queue and see only that one ("" = CPU)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(slots.get())


def _multi_gpu(fn: Callable[[Any], Any], jobs: Sequence[Any], cfg: LauncherConfig) -> list[Any]:
    gpus = cfg.gpus if cfg.gpus is not None else _visible_gpus()
    if not gpus and cfg.workers is None:
        raise ConfigError(
            "launcher.kind: multi-gpu found no GPU; set launcher.gpus, or launcher.workers to run "
            "that many CPU worker processes"
        )
    workers = cfg.workers or len(gpus)
    context = get_context("spawn")  # CUDA cannot be used in forked children
    with context.Manager() as manager:
        slots = manager.Queue()
        for i in range(workers):
            slots.put(gpus[i % len(gpus)] if gpus else "")
        with ProcessPoolExecutor(
            workers, mp_context=context, initializer=_pin_device, initargs=(slots,)
        ) as pool:
            futures = [pool.submit(fn, job) for job in jobs]
            return [_outcome(f.result) for f in futures]


def _outcome(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except Exception as err:  # noqa: BLE001 - handed back to the sweep, which reports it
        return err


# ---------------------------------------------------------------- submitit (SLURM)


def _submitit(
    fn: Callable[[Any], Any], jobs: Sequence[Any], cfg: LauncherConfig, folder: Path
) -> list[Any]:
    try:
        import submitit
    except ImportError:
        raise ConfigError(
            "launcher.kind: slurm needs submitit (pip install submitit, or robustvlm[slurm])"
        ) from None
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cfg.cluster)
    try:
        executor.update_parameters(**cfg.parameters)
    except (ValueError, TypeError, NameError) as err:
        raise ConfigError(f"launcher.parameters: {str(err).splitlines()[0]}") from None
    submitted = executor.map_array(fn, list(jobs))
    return [_outcome(job.result) for job in submitted]
