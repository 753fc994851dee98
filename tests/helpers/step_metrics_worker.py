"""Run the toy regression task under DDP on CPU (gloo) with gradient accumulation, for
training/test_step_metrics.py: the logged row must be the mean over micro-batches and processes.

Usage: torchrun --nproc_per_node 2 tests/helpers/step_metrics_worker.py OUT_DIR TRAIN_JSON
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from toy_tasks import RegressionTask  # noqa: E402

from robustvlm.config import TrainConfig  # noqa: E402
from robustvlm.training.loop import run_training  # noqa: E402

if __name__ == "__main__":
    torch.set_num_threads(1)
    out, cfg = Path(sys.argv[1]), TrainConfig.model_validate(json.loads(sys.argv[2]))
    run_training(RegressionTask(), cfg, out, settings={"train": cfg.model_dump(mode="json")}, progress=False)
