"""The one training loop: every kind of model trains through `run_training` with a task.

Outputs in the run folder (besides what the task writes):
  config.resolved.yaml   every setting, defaults filled in (see `robustvlm.runs`)
  train_log.jsonl        one row per logged optimizer step: `step`, the task's row (`loss`, ...)
                         averaged over the step's micro-batches and processes
                         (`training.metrics`), `grad_norm`, `lr`, `seconds` (and, with
                         `train.skip_nonfinite_steps`, `skipped_steps`: how many so far)
  checkpoints/step-N/    see `training.checkpoint`
  final/                 the task's inference format
  <tracker folders>      with `train.report_to` (e.g. tensorboard/), through Accelerate

The schedule is AdamW with linear warm-up over `train.warmup_ratio` of the steps, then cosine
decay; gradients are accumulated over `train.grad_accum` micro-batches and clipped to
`train.clip_norm`. `--resume` continues from the newest checkpoint exactly: the same batches,
RNG draws and task state as an uninterrupted run.

A step whose loss or gradient norm is not finite (NaN, infinity) stops the run with a
`NonFiniteStep` error naming the step: its update is not applied, no checkpoint is written after
it (the last good one stays) and `final/` is never written, so a diverged model is never saved as
a success. With `train.skip_nonfinite_steps: true` such a step's update is skipped instead (the
learning-rate schedule still advances), and the count is logged as `skipped_steps` and printed at
the end; the option may be switched on when resuming a stopped run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from pydantic import BaseModel
from torch.optim.lr_scheduler import LRScheduler
from tqdm.auto import tqdm
from transformers import get_cosine_schedule_with_warmup

from robustvlm.config import TrainConfig
from robustvlm.errors import ConfigError, RobustVLMError
from robustvlm.runs import (
    append_jsonl,
    atomic_folder,
    claim_run_folder,
    flatten_settings,
    read_jsonl,
    resolved_settings,
    write_jsonl,
)
from robustvlm.training.checkpoint import (
    list_checkpoints,
    load_checkpoint,
    register_checkpoint_hooks,
    save_checkpoint,
)
from robustvlm.training.metrics import step_row
from robustvlm.training.sampler import ResumableBatchSampler
from robustvlm.training.task import SetupContext, StepContext, TaskSetup, TrainingTask

LOG_FILE = "train_log.jsonl"
#: Settings a resumed run may change: how later non-finite steps are handled.
MAY_DIFFER_ON_RESUME = ("train.skip_nonfinite_steps",)


class NonFiniteStep(RobustVLMError):
    """A training step's loss or gradient norm was NaN or infinite (see the module doc)."""

    def __init__(self, step: int, loss: float | None, grad_norm: float, out_dir: Path):
        kept = list_checkpoints(out_dir)
        last = f"the last good checkpoint is {kept[-1]}" if kept else "no checkpoint was written yet"
        super().__init__(
            f"training step {step}: the loss is {loss} and the gradient norm {grad_norm}, not "
            f"finite; stopped without writing {out_dir / 'final'} ({last}); lower train.lr or set "
            "train.skip_nonfinite_steps: true to skip such steps"
        )
        self.step = step


@dataclass
class LoopResult:
    """Where a finished run left its outputs."""

    out_dir: Path
    final_dir: Path
    steps: int
    skipped_steps: int = 0


def use_bf16(setting: Any) -> bool:
    """`train.bf16`: "auto" = where a GPU supports it."""
    if setting == "auto":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(setting)


def make_accelerator(cfg: TrainConfig, out_dir: Path) -> Accelerator:
    """The run's Accelerator: bf16 per `train.bf16`, trackers per `train.report_to`.

    `cpu=True` without a GPU lets Accelerate see a torchrun launch as multi-process (gloo).
    """
    return Accelerator(
        mixed_precision="bf16" if use_bf16(cfg.bf16) else "no",
        cpu=not torch.cuda.is_available(),
        log_with=list(cfg.report_to) or None,
        project_dir=str(out_dir),
    )


def tracker_config(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings flattened to {dotted key: int | float | str | bool}, as trackers' hparams take."""
    return {
        key: value if isinstance(value, bool | int | float | str) else str(value)
        for key, value in flatten_settings(settings).items()
    }


def _batch_stream(sampler: ResumableBatchSampler) -> Iterator[list[int]]:
    """Endless stream of index lists, epoch after epoch, starting where the sampler's state says."""
    while True:
        yield from sampler


def _to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _clip(accelerator: Accelerator, groups: list[list[torch.nn.Parameter]], max_norm: float) -> float:
    """Clip each group's gradients to `max_norm` on its own; the norm of all of them before
    clipping (what a single group's clipping returns)."""
    norms = [float(accelerator.clip_grad_norm_(group, max_norm)) for group in groups if group]
    return math.sqrt(sum(n * n for n in norms))


def _reset_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    getattr(optimizer, "optimizer", optimizer).state.clear()


@dataclass
class _Run:
    """What every step of a run shares (see `run_training`)."""

    task: TrainingTask
    cfg: TrainConfig
    out_dir: Path
    accelerator: Accelerator
    setup: TaskSetup
    total: int
    optimizer: torch.optim.Optimizer
    scheduler: LRScheduler
    models: dict[str, torch.nn.Module]
    clip_groups: list[list[torch.nn.Parameter]]

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def log_path(self) -> Path:
        return self.out_dir / LOG_FILE


def run_training(
    task: TrainingTask,
    cfg: TrainConfig,
    out_dir: str | Path,
    *,
    settings: BaseModel | dict[str, Any],
    resume: bool = False,
    progress: bool = True,
) -> LoopResult:
    """Train `task` with the optimisation settings `cfg` into `out_dir` (see the module doc).

    Args:
        settings: the run's whole resolved config (written to, and with `resume` checked
            against, config.resolved.yaml; sent to the trackers).
        resume: continue from the newest checkpoint; without it, a folder holding a run is refused.
    """
    out_dir = Path(out_dir)
    accelerator = make_accelerator(cfg, out_dir)
    if cfg.cpu_threads and accelerator.device.type == "cpu":
        torch.set_num_threads(cfg.cpu_threads)
    if accelerator.is_main_process:
        claim_run_folder(out_dir, settings, command=task.command, resume=resume, may_differ=MAY_DIFFER_ON_RESUME)
        task.prepare_files(out_dir)
    accelerator.wait_for_everyone()

    run = _prepare(task, cfg, out_dir, accelerator)
    start, elapsed, skipped = _restore(run, resume)
    if cfg.report_to:
        accelerator.init_trackers(out_dir.name, config=tracker_config(resolved_settings(settings)))
    skipped = _train_steps(run, start, elapsed, skipped, progress)
    return _finish(run, skipped)


def _prepare(task: TrainingTask, cfg: TrainConfig, out_dir: Path, accelerator: Accelerator) -> _Run:
    """Seed, set the task up, and prepare its models and the optimizer with Accelerate."""
    set_seed(cfg.seed)
    ctx = SetupContext(out_dir, accelerator, cfg.batch_size * accelerator.num_processes, accelerator.is_main_process)
    setup = task.setup(ctx)
    steps_per_epoch = max(1, len(setup.sampler) // cfg.grad_accum)
    total = cfg.steps or max(1, math.ceil(cfg.epochs * steps_per_epoch))
    params = [p for m in setup.models.values() for p in m.parameters() if p.requires_grad]
    if not params:
        raise ConfigError("training: the task's models have no trainable parameters")
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total), total)
    names = list(setup.models)
    *prepared, optimizer = accelerator.prepare(*setup.models.values(), optimizer)
    models = dict(zip(names, prepared))
    # FSDP2 swaps parameters for sharded ones: clip those the prepared models hold.
    params = [p for m in models.values() for p in m.parameters() if p.requires_grad]
    clip_groups = setup.clip_groups(models) if setup.clip_groups is not None else [params]
    register_checkpoint_hooks(accelerator)
    return _Run(task, cfg, out_dir, accelerator, setup, total, optimizer, scheduler, models, clip_groups)


def _restore(run: _Run, resume: bool) -> tuple[int, float, int]:
    """(first step, seconds so far, skipped steps so far): from the newest checkpoint with
    `resume` (the log cut back to it), else (0, 0.0, 0) with a fresh log."""
    start, elapsed, skipped = 0, 0.0, 0
    checkpoints = list_checkpoints(run.out_dir) if resume else []
    if checkpoints:
        state = load_checkpoint(run.accelerator, checkpoints[-1])
        start, elapsed, skipped = state["step"], state["seconds"], state.get("skipped_steps", 0)
        run.scheduler.load_state_dict(state["scheduler"])
        run.setup.sampler.load_state_dict(state["sampler"])
        run.task.load_state_dict(state["task"])
        if run.is_main:
            write_jsonl(run.log_path, [r for r in read_jsonl(run.log_path) if r["step"] <= start])
            print(f"resuming from {checkpoints[-1].name} (step {start} of {run.total})")
    elif run.is_main:
        run.log_path.unlink(missing_ok=True)
        if run.setup.summary:
            print(f"{run.setup.summary}, {run.total} steps")
    return start, elapsed, skipped


def _train_steps(run: _Run, start: int, elapsed: float, skipped: int, progress: bool) -> int:
    """Steps `start` to the last, logging and checkpointing as `run.cfg` says; returns the
    number of skipped (non-finite) steps so far."""
    cfg = run.cfg
    stream = _batch_stream(run.setup.sampler)
    for model in run.models.values():
        model.train()
    bar = tqdm(total=run.total, initial=start, disable=not (progress and run.is_main), desc=run.task.label, unit="step")
    t0 = time.perf_counter() - elapsed
    with run.log_path.open("a", encoding="utf-8") if run.is_main else nullcontext() as log:
        for step in range(start, run.total):
            values, grad_norm, finite = _optimizer_step(run, step, stream)
            if not finite:
                skipped += 1
            done = step + 1
            if not finite or done % cfg.log_every == 0 or done == run.total:
                row = {
                    "step": done,
                    **(values if finite else {}),
                    **({"grad_norm": float(grad_norm)} if finite else {}),
                    **({"skipped_steps": skipped} if cfg.skip_nonfinite_steps else {}),
                    "lr": run.scheduler.get_last_lr()[0],
                    "seconds": round(time.perf_counter() - t0, 3),
                }
                _log(run, log, bar, row)
            bar.update(1)
            if done % cfg.save_every == 0 or done == run.total:
                state = {"seconds": time.perf_counter() - t0, "scheduler": run.scheduler.state_dict(),
                         "sampler": run.setup.sampler.state_dict(), "task": run.task.state_dict(),
                         "skipped_steps": skipped}
                save_checkpoint(run.accelerator, run.out_dir, done, state, keep=cfg.keep_checkpoints)
    bar.close()
    return skipped


def _optimizer_step(run: _Run, step: int, stream: Iterator[list[int]]) -> tuple[dict[str, float], float, bool]:
    """One optimizer step over `train.grad_accum` micro-batches: (the task's row averaged over
    them and the processes, the gradient norm before clipping, whether both are finite). A
    non-finite step's update is not applied; it raises NonFiniteStep unless
    `train.skip_nonfinite_steps`."""
    cfg, accelerator = run.cfg, run.accelerator
    if run.task.resets_optimizer_at(step):
        _reset_optimizer_state(run.optimizer)
    rows = []
    for micro in range(cfg.grad_accum):
        ctx = StepContext(step, run.models, accelerator, cfg.grad_accum, micro == cfg.grad_accum - 1)
        batch = _to_device(run.setup.collate(next(stream)), accelerator.device)
        with nullcontext() if ctx.last_micro else ctx.no_sync(), accelerator.autocast():
            rows.append(run.task.training_step(batch, ctx))
    grad_norm = _clip(accelerator, run.clip_groups, cfg.clip_norm)
    values = step_row(rows, accelerator)  # every process: a collective call
    loss = values.get("loss")
    finite = math.isfinite(grad_norm) and (loss is None or math.isfinite(loss))
    if finite:
        run.optimizer.step()
    elif not cfg.skip_nonfinite_steps:
        raise NonFiniteStep(step + 1, loss, grad_norm, run.out_dir)
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    return values, grad_norm, finite


def _log(run: _Run, log: TextIO | None, bar: tqdm, row: dict[str, Any]) -> None:
    """Append a step's row to the log and the progress bar (main process) and the trackers."""
    if run.is_main:
        assert log is not None  # opened on the main process
        append_jsonl(log, [row])
        bar.set_postfix({k: f"{row[k]:.3g}" for k in run.task.progress_keys if k in row})
    if run.cfg.report_to:
        run.accelerator.log({k: v for k, v in row.items() if k != "step"}, step=row["step"])


def _finish(run: _Run, skipped: int) -> LoopResult:
    """Write the task's final folder (main process) and close the trackers."""
    if skipped and run.is_main:
        print(f"skipped {skipped} of {run.total} steps whose loss or gradient norm was not finite "
              "(train.skip_nonfinite_steps); see skipped_steps in train_log.jsonl")
    final_dir = run.out_dir / "final"
    state_dicts = {name: run.accelerator.get_state_dict(model) for name, model in run.models.items()}
    if run.is_main:
        with atomic_folder(final_dir) as tmp:
            run.task.save_final(tmp, state_dicts)
    run.accelerator.wait_for_everyone()
    if run.cfg.report_to:
        run.accelerator.end_training()
    return LoopResult(out_dir=run.out_dir, final_dir=final_dir, steps=run.total, skipped_steps=skipped)
