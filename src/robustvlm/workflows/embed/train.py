"""`robustvlm embed train`: turn a VLM into an embedding model with contrastive training."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robustvlm.config import EmbedRunConfig
from robustvlm.embeddings.task import EmbeddingTask
from robustvlm.models.support import require_capability
from robustvlm.training.loop import LoopResult, run_training


@dataclass
class EmbedTrainResult(LoopResult):
    """The loop's result and the backend family of the trained model."""

    family: str = ""


def embed_train(
    cfg: EmbedRunConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True
) -> EmbedTrainResult:
    """Train `cfg.model` on the pairs of `cfg.data` into `out_dir` (see `embeddings.task`)."""
    require_capability(cfg.model.ref, "embed")
    task = EmbeddingTask(cfg)
    done = run_training(task, cfg.train, out_dir, settings=cfg, resume=resume, progress=progress)
    return EmbedTrainResult(**vars(done), family=task.family)
