"""Checkpoints that resume a run exactly: trainable weights, optimizer, scheduler, RNG, trainer state.

Layout of `OUT/checkpoints/step-000120/`:
  weights.safetensors   trainable parameters only (frozen ones are rebuilt from the base model)
  optimizer.pt          optimizer state dict (tensors + numbers; loaded with weights_only=True)
  rng.pt                torch CPU (and CUDA) RNG states (loaded with weights_only=True)
  state.json            step, scheduler, sampler, objective, python/numpy RNG states

A checkpoint is written to a temporary folder and renamed, so a killed run never leaves a
half-written checkpoint that looks complete.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

CKPT_DIR = "checkpoints"


def _trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items() if k in names}


def _rng_state() -> dict[str, Any]:
    np_state = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    np_state = state["numpy"]
    np.random.set_state((np_state[0], np.array(np_state[1], dtype=np.uint32), *np_state[2:]))


def save_checkpoint(
    out_dir: Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    trainer_state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write checkpoint `step` atomically and delete all but the newest `keep`."""
    root = Path(out_dir) / CKPT_DIR
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(_trainable_state(model), str(tmp / "weights.safetensors"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, tmp / "rng.pt")
    state = {
        "step": step,
        "scheduler": scheduler.state_dict(),
        "rng": _rng_state(),
        **trainer_state,
    }
    (tmp / "state.json").write_text(json.dumps(state), encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in list_checkpoints(out_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(out_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(out_dir) / CKPT_DIR
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("step-*") if (p / "state.json").is_file())


def load_checkpoint(
    path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
) -> dict[str, Any]:
    """Restore weights, optimizer, scheduler and RNG from `path`; return the state dict."""
    path = Path(path)
    weights = load_file(str(path / "weights.safetensors"))
    missing = set(weights) - set(model.state_dict())
    if missing:
        raise RuntimeError(
            f"{path}: checkpoint has parameters the model lacks: {sorted(missing)[:5]}"
        )
    model.load_state_dict(weights, strict=False)
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    state = json.loads((path / "state.json").read_text(encoding="utf-8"))
    scheduler.load_state_dict(state["scheduler"])
    rng = torch.load(path / "rng.pt", weights_only=True)
    torch.set_rng_state(rng["cpu"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    _set_rng_state(state["rng"])
    return state
