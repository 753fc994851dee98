"""Checkpoints through Accelerate's state API, so a run resumes exactly on any backend.

`accelerator.save_state` / `load_state` write and restore the models, the optimizer and every
process's RNG states the way each backend needs: plain files for one process or DDP, sharded
model and optimizer states for DeepSpeed ZeRO and FSDP. Saving `optimizer.state_dict()` by hand,
as robustvlm once did, is wrong under ZeRO, where each process holds only its shard.

What Accelerate is not given:
- the trainer's own state (step, elapsed seconds, learning-rate schedule, batch sampler position
  and the task's state, e.g. an objective's controller) goes into `trainer_state.json` beside
  Accelerate's files. Accelerate's `register_for_checkpointing` would pickle these objects and
  load them back with `weights_only=False`; JSON cannot run code when it is read. The schedule is
  not `prepare`d either: Accelerate's scheduler wrapper steps once per process, while ours counts
  optimizer steps over the global batch.
- frozen weights: without sharding, a pre-save hook keeps only the trainable parameters (frozen
  ones are rebuilt from the base model), so a LoRA or frozen-vision run does not write the
  whole backbone at every checkpoint; a pre-load hook checks that the file holds nothing the
  model lacks.

Layout of `OUT/checkpoints/step-000120/`: Accelerate's files (`model.safetensors`,
`optimizer.bin`, `random_states_<process>.pkl`; DeepSpeed / FSDP folders instead of the first two)
and `trainer_state.json`. A checkpoint is written under a temporary name and renamed when every
process has finished, so a killed run never leaves a half-written checkpoint that looks complete.
Optimizer and RNG files are loaded with `weights_only=True`, weights with safetensors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from accelerate.utils import DistributedType
from safetensors import safe_open
from torch import nn

CKPT_DIR = "checkpoints"
STATE_FILE = "trainer_state.json"
WEIGHTS_FILE = "model.safetensors"
_SHARDED = (DistributedType.DEEPSPEED, DistributedType.FSDP)


def list_checkpoints(out_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(out_dir) / CKPT_DIR
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("step-*") if (p / STATE_FILE).is_file())


def _trainable_names(model: nn.Module) -> set[str]:
    return {name for name, p in model.named_parameters() if p.requires_grad}


def _keep_trainable(models: list, weights: list[dict], _output_dir: str) -> None:
    """Accelerate pre-save hook: drop frozen tensors from each model's state dict, in place."""
    for model, state in zip(models, weights):
        names = _trainable_names(model)
        for key in [k for k in state if k not in names]:
            del state[key]


def _check_saved_names(models: list, input_dir: str) -> None:
    """Accelerate pre-load hook: a checkpoint holding tensors the model lacks is an error."""
    for i, model in enumerate(models):
        path = Path(input_dir) / (WEIGHTS_FILE if i == 0 else WEIGHTS_FILE.replace(".", f"_{i}."))
        if not path.is_file():
            continue
        with safe_open(str(path), framework="pt") as f:
            unknown = set(f.keys()) - set(model.state_dict())
        if unknown:
            raise RuntimeError(
                f"{path}: checkpoint has parameters the model lacks: {sorted(unknown)[:5]}"
            )


def register_checkpoint_hooks(accelerator: Accelerator) -> None:
    """Save only trainable weights where Accelerate writes whole state dicts (see module doc)."""
    if accelerator.distributed_type not in _SHARDED:
        accelerator.register_save_state_pre_hook(_keep_trainable)
        accelerator.register_load_state_pre_hook(_check_saved_names)


def save_checkpoint(
    accelerator: Accelerator, out_dir: Path, step: int, state: dict[str, Any], *, keep: int = 2
) -> Path:
    """Write checkpoint `step` (every process must call this) and keep only the newest `keep`.

    Args:
        state: JSON-safe trainer state written to trainer_state.json (with the step added).
    """
    root = Path(out_dir) / CKPT_DIR
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / STATE_FILE).write_text(json.dumps({"step": step, **state}), encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in list_checkpoints(out_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(accelerator: Accelerator, path: Path) -> dict[str, Any]:
    """Restore models, optimizer and RNG from `path`; return its trainer state."""
    path = Path(path)
    partial = {} if accelerator.distributed_type in _SHARDED else {"strict": False}
    accelerator.load_state(str(path), **partial)
    return json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
