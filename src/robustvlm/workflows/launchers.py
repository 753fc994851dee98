"""The one job runner: every workflow that runs jobs in worker processes goes through `run_jobs`
(sweeps, `rm matrix`, `robustness task-signal`, `demo invariance`), as DomainBed's
`command_launchers` do.

A job is a picklable argument of a picklable (module-level) function. Whatever the launcher:
- a failed job does not stop the others; when all have ended, `JobsFailed` names every failed
  job with its error (the first one chained, with its traceback), and the finished jobs' outputs
  stay where the jobs wrote them;
- finished jobs are not run again, so a re-run resumes: those `done` says are finished (jobs
  that keep their outputs in their own folders), and those whose result is kept in `store`;
- one progress bar counts the finished jobs.

Launchers (`JobRunnerConfig.kind`):
- `local`: `workers` 1 (the default): one after another in this process; more: a pool of that
  many spawned CPU processes, one torch thread each;
- `multi-gpu`: a pool of worker processes (spawned), one per GPU, each seeing only its own GPU
  (`CUDA_VISIBLE_DEVICES`); `workers` sets the pool size where there is no GPU (CPU processes);
- `slurm`: one array job through submitit's `AutoExecutor` (`cluster: slurm`), whose
  `parameters` are submitit's (`slurm_partition`, `timeout_min`, `gpus_per_node`, `cpus_per_task`,
  ...); `cluster: local` runs the same jobs as local subprocesses (submitit's LocalExecutor) and
  `cluster: debug` in this process (submitit's DebugExecutor), to test a SLURM setup anywhere.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from robustvlm.errors import ConfigError, RobustVLMError

LAUNCHERS = ("local", "multi-gpu", "slurm")


class JobRunnerConfig(BaseModel):
    """How `run_jobs` runs jobs: a sweep's `launcher:` section (see the module doc)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    kind: Literal["local", "multi-gpu", "slurm"] = "local"
    workers: int | None = Field(
        default=None, ge=1, description="local: processes (default 1: this one); multi-gpu: processes (default one per GPU)"
    )
    gpus: list[int] | None = Field(default=None, description="multi-gpu: GPU indices (default all visible)")
    cluster: Literal["slurm", "local", "debug"] = "slurm"
    parameters: dict[str, Any] = Field(default_factory=dict, description="submitit parameters")


class JobsFailed(RobustVLMError):
    """Some jobs raised; `results` holds, in job order, each job's result or its exception
    (None for jobs skipped as done)."""

    def __init__(self, message: str, results: list[Any]):
        super().__init__(message)
        self.results = results


Note = Callable[[int, Any], None]
"""Called by a launcher as each job ends: (its position in the launched jobs, result or error)."""
Launch = Callable[[Callable[[Any], Any], list, Note], None]


def run_jobs(
    fn: Callable[[Any], Any],
    jobs: Sequence[Any],
    cfg: JobRunnerConfig | None = None,
    folder: Path | None = None,
    *,
    name: Callable[[Any], str] = str,
    done: Callable[[Any], bool] | None = None,
    store: Path | None = None,
    desc: str = "jobs",
    progress: bool = True,
) -> list[Any]:
    """Run `fn(job)` for every job not yet finished with the launcher `cfg` (default: local, in
    this process); returns the results in job order.

    Args:
        folder: the launcher's own files (submitit's logs and pickles; slurm only).
        name: a job's name in the failure report, e.g. "erm draw 1 seed 0".
        done: jobs it says are finished are skipped (result None): for jobs that keep their
            outputs in their own folders.
        store: a folder where each job's result is kept (pickled, under a hash of `fn` and the
            job) as soon as it ends; a job with a kept result is not run again, its result read
            back: for jobs that write nothing themselves. The hash covers every argument, not
            the code: empty the folder after changing what a job computes.
        desc: the progress bar's label and the noun of the failure report ("runs", "models").

    Raises:
        JobsFailed: after every job has ended, when some raised: "2 of 8 runs failed (NAME:
            ERROR; ...); the finished runs are kept: re-run the same command to resume".
    """
    cfg = cfg or JobRunnerConfig()
    kept = [store / f"{_job_key(fn, job)}.pkl" for job in jobs] if store is not None else None
    results: list[Any] = [None] * len(jobs)
    pending = []
    for i, job in enumerate(jobs):
        if kept is not None and kept[i].is_file():
            results[i] = pickle.loads(kept[i].read_bytes())
        elif done is None or not done(job):
            pending.append(i)
    launch = _launcher(cfg, folder) if pending else None  # bad settings fail before the bar opens
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(pending), disable=not progress, desc=desc, unit="job")

    def note(position: int, outcome: Any) -> None:
        i = pending[position]
        results[i] = outcome
        if kept is not None and not isinstance(outcome, Exception):
            _keep(kept[i], outcome)
        bar.update(1)

    try:
        if launch is not None:
            launch(fn, [jobs[i] for i in pending], note)
    finally:
        bar.close()
    failed = [(jobs[i], results[i]) for i in pending if isinstance(results[i], Exception)]
    if failed:
        raise _failure_report(failed, results, name, desc) from failed[0][1]
    return results


def _failure_report(
    failed: list[tuple[Any, Exception]], results: list[Any], name: Callable[[Any], str], desc: str
) -> JobsFailed:
    """The JobsFailed of `run_jobs`, naming the first five failed jobs with their errors."""
    lines = "; ".join(f"{name(job)}: {_last_line(err)}" for job, err in failed[:5])
    more = f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
    return JobsFailed(
        f"{len(failed)} of {len(results)} {desc} failed ({lines}{more}); the finished {desc} are "
        "kept: re-run the same command to resume",
        results,
    )


def _job_key(fn: Callable[[Any], Any], job: Any) -> str:
    """A name for (fn, job) that changes with the function or any of its or the job's arguments."""
    return hashlib.sha256(pickle.dumps((fn, job), protocol=4)).hexdigest()[:24]


def _keep(path: Path, result: Any) -> None:
    """Pickle `result` to `path`, written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(pickle.dumps(result, protocol=4))
    tmp.replace(path)


def _last_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[-1] if text else type(err).__name__


def _launcher(cfg: JobRunnerConfig, folder: Path | None) -> Launch:
    """The launcher of `cfg`, its settings checked."""
    if cfg.kind == "multi-gpu":
        return _multi_gpu(cfg)
    if cfg.kind == "slurm":
        return _submitit(cfg, folder)
    if cfg.workers is not None and cfg.workers > 1:
        return partial(_pool, workers=cfg.workers, initializer=_one_thread, initargs=())
    return _in_process


def _outcome(get: Callable[[], Any]) -> Any:
    """`get()`, or the exception it raised (handed back to `run_jobs`, which reports it)."""
    try:
        return get()
    except Exception as err:  # noqa: BLE001
        return err


def _in_process(fn: Callable[[Any], Any], jobs: list, note: Note) -> None:
    for position, job in enumerate(jobs):
        note(position, _outcome(partial(fn, job)))


# ---------------------------------------------------------------- process pools


def _pool(fn: Callable[[Any], Any], jobs: list, note: Note, *, workers: int,
          initializer: Callable[..., None], initargs: tuple[object, ...]) -> None:
    """Run the jobs in `workers` spawned processes (CUDA cannot be used in forked children)."""
    context = get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=initializer, initargs=initargs) as pool:
        futures = {pool.submit(fn, job): i for i, job in enumerate(jobs)}
        for future in as_completed(futures):
            note(futures[future], _outcome(future.result))


def _one_thread() -> None:
    """CPU pool initializer: one torch thread per worker, so workers do not fight for cores."""
    import torch

    torch.set_num_threads(1)


def _visible_gpus() -> list[int]:
    import torch

    return list(range(torch.cuda.device_count()))


def _pin_device(slots: queue.Queue[int | str]) -> None:
    """GPU pool initializer: take one GPU index from the queue and see only that one ("" = CPU)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(slots.get())


def _multi_gpu(cfg: JobRunnerConfig) -> Launch:
    gpus = cfg.gpus if cfg.gpus is not None else _visible_gpus()
    if not gpus and cfg.workers is None:
        raise ConfigError(
            "launcher.kind: multi-gpu found no GPU; set launcher.gpus, or launcher.workers to run "
            "that many CPU worker processes"
        )
    workers = cfg.workers or len(gpus)

    def launch(fn: Callable[[Any], Any], jobs: list, note: Note) -> None:
        with get_context("spawn").Manager() as manager:
            slots = manager.Queue()
            for i in range(workers):
                slots.put(gpus[i % len(gpus)] if gpus else "")
            _pool(fn, jobs, note, workers=workers, initializer=_pin_device, initargs=(slots,))

    return launch


# ---------------------------------------------------------------- submitit (SLURM)


def _submitit(cfg: JobRunnerConfig, folder: Path | None) -> Launch:
    try:
        import submitit
    except ImportError:
        raise ConfigError(
            "launcher.kind: slurm needs submitit (pip install submitit, or robustvlm[slurm])"
        ) from None
    if folder is None:
        raise ConfigError("launcher.kind: slurm needs a folder for submitit's files")
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cfg.cluster)
    try:
        executor.update_parameters(**cfg.parameters)
    except (ValueError, TypeError, NameError) as err:
        raise ConfigError(f"launcher.parameters: {str(err).splitlines()[0]}") from None

    def launch(fn: Callable[[Any], Any], jobs: list, note: Note) -> None:
        for position, job in enumerate(executor.map_array(fn, jobs)):
            note(position, _outcome(job.result))

    return launch
