"""The contract between the training loop and one kind of training (a *task*).

The loop (`training.loop.run_training`) owns everything every kind of training shares:
Accelerate (devices, processes, mixed precision, DeepSpeed / FSDP), the AdamW optimizer and the
cosine schedule, gradient accumulation, clipping, the progress bar, `train_log.jsonl` and the
experiment trackers, checkpoints and exact resume. A task supplies what differs, in the spirit of
TRL's split between its trainer and `compute_loss` / `training_step`:

- `prepare_files`: files every process will read (run once, by the main process);
- `setup`: the data, the model(s) to prepare (parameters with `requires_grad` train), the batch
  sampler and the collate function;
- `training_step`: one micro-batch: forward, `ctx.backward(loss)` (as many passes as the task
  needs: gradient caching runs its own), and its row to log (the loop averages the rows of a
  step's micro-batches and processes);
- `state_dict` / `load_state_dict`: task state a checkpoint must carry (e.g. an objective's
  penalty-weight controller), JSON-safe;
- `save_final`: the trained model in its inference format.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from robustvlm.training.sampler import ResumableBatchSampler


@dataclass
class SetupContext:
    """What a task may use while it loads its data and models.

    Attributes:
        out_dir: the run folder.
        accelerator: the run's Accelerator (process index, world size, device).
        global_batch_size: examples per optimizer micro-step over all processes
            (`train.batch_size` x processes).
        verbose: print dataset summaries (main process only).
    """

    out_dir: Path
    accelerator: Accelerator
    global_batch_size: int
    verbose: bool

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process


@dataclass
class TaskSetup:
    """What a task hands the loop once its data and models are loaded.

    Attributes:
        models: {name: module} for Accelerate to prepare (wrap for DDP / FSDP / DeepSpeed);
            every parameter with `requires_grad` is optimised.
        sampler: global batches of dataset indices, each process getting its slice; its
            position is checkpointed, so a resumed run sees exactly the batches it had not.
        collate: this process's indices of one batch -> the batch (tensors on the CPU).
        summary: one line printed when a fresh run starts.
        clip_groups: the prepared models -> groups of trainable parameters whose gradients are
            clipped each on its own to `train.clip_norm` (models trained side by side whose
            updates must not depend on each other's gradient scale); None: all of them together.
    """

    models: dict[str, torch.nn.Module]
    sampler: ResumableBatchSampler
    collate: Callable[[list[int]], dict[str, Any]]
    summary: str = ""
    clip_groups: Callable[[dict[str, torch.nn.Module]], list[list[torch.nn.Parameter]]] | None = None


def indexed(collator: Callable[[list[Any]], dict[str, Any]], examples: list[Any]) -> Callable[[list[int]], dict[str, Any]]:
    """A `TaskSetup.collate`: dataset indices -> `collator` of those examples."""
    return lambda indices: collator([examples[i] for i in indices])


@dataclass
class StepContext:
    """One micro-batch as the loop hands it to `TrainingTask.training_step`.

    Attributes:
        step: the optimizer step (0-based) this micro-batch belongs to.
        models: the prepared modules, by the names `TaskSetup.models` gave.
        accelerator: the run's Accelerator.
        grad_accum: micro-batches per optimizer step.
        last_micro: True for the micro-batch after which the optimizer steps.
    """

    step: int
    models: dict[str, torch.nn.Module]
    accelerator: Accelerator
    grad_accum: int
    last_micro: bool

    def backward(self, loss: torch.Tensor) -> None:
        """Back-propagate `loss` scaled by 1 / grad_accum (gradients add up over micro-batches)."""
        self.accelerator.backward(loss / self.grad_accum)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Skip the gradient all-reduce of every prepared module inside this block (a task that
        runs several backward passes per micro-batch synchronises only on the last one)."""
        with ExitStack() as stack:
            for model in self.models.values():
                stack.enter_context(self.accelerator.no_sync(model))
            yield


class TrainingTask(ABC):
    """One kind of training run by `training.loop.run_training` (see the module doc).

    Attributes:
        command: the robustvlm command whose run folders this task writes ("train", "rm train",
            "embed train"; `runs.claim_run_folder` names it).
        label: the progress bar's label (e.g. the objective's name).
        progress_keys: log-row keys shown beside the progress bar.
        env_names: the training environments' names, set by `setup` (environment id i is
            `env_names[i]`); empty for a task whose data has no environments.
    """

    command: str = "train"
    label: str = "train"
    progress_keys: tuple[str, ...] = ("loss",)
    env_names: Sequence[str] = ()

    def prepare_files(self, out_dir: Path) -> None:  # noqa: B027 - optional hook
        """Write files every process reads (e.g. a synthesised benchmark); main process only."""

    @abstractmethod
    def setup(self, ctx: SetupContext) -> TaskSetup:
        """Load data and build models on every process."""

    @abstractmethod
    def training_step(self, batch: dict[str, Any], ctx: StepContext) -> dict[str, float]:
        """Forward and backward one micro-batch; return its log row (a float `loss`, ...: means
        over this micro-batch; the loop logs their mean over the step's micro-batches and
        processes, `training.metrics`)."""

    def resets_optimizer_at(self, step: int) -> bool:
        """True when the optimizer's state should be cleared before `step` (IRM's anneal)."""
        return False

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe task state to checkpoint."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what `state_dict` returned."""

    @abstractmethod
    def save_final(self, final_dir: Path, state_dicts: dict[str, dict[str, torch.Tensor]]) -> None:
        """Write the trained model for inference (main process only).

        Args:
            final_dir: where to write it.
            state_dicts: {model name: its full state dict}, gathered from every process where
                the weights are sharded (FSDP, ZeRO-3).
        """
