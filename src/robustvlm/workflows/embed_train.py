"""`robustvlm embed train`: turn a VLM into an embedding model with contrastive training."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robustvlm.config import EmbedRunConfig
from robustvlm.embeddings.task import EmbeddingTask
from robustvlm.training.loop import run_training


@dataclass
class EmbedTrainResult:
    """Where a finished run left its outputs, and the backend family of the trained model."""

    out_dir: Path
    final_dir: Path
    steps: int
    family: str


def embed_train(
    cfg: EmbedRunConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True
) -> EmbedTrainResult:
    """Train `cfg.model` on the pairs of `cfg.data` into `out_dir` (see `embeddings.task`)."""
    task = EmbeddingTask(cfg)
    done = run_training(task, cfg.train, out_dir, settings=cfg, resume=resume, progress=progress)
    return EmbedTrainResult(done.out_dir, done.final_dir, done.steps, task.family)
