"""A reward model's logged accuracy and reward gap are those of the whole optimizer step (every
micro-batch, every process), checked against the trained model scored pair by pair."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from robustvlm.config import RewardConfig, validate_config
from robustvlm.data.from_config import training_examples
from robustvlm.data.preferences import load_pairs_from_config
from robustvlm.models.reward import load_reward_model
from robustvlm.reward.scoring import score_pairs
from robustvlm.workflows.reward.train import train_reward_model

PAIRS = 16  # training pairs; lr 0 keeps the initial weights, so one step scores all of them


def raw_config(batch_size: int) -> dict:
    """16 pairs = batch_size x processes x grad_accum 2: the step is one epoch of the data."""
    return {
        "model": {"name": "tiny:idefics3", "trainable": "full", "tiny": {"hidden_size": 32, "vocab_size": 300}},
        "data": {"benchmark": "preferences", "n_per_env": 16, "envs": ["long", "plain"], "max_train_per_env": 8},
        "loss": "standard",
        "train": {"steps": 1, "lr": 0.0, "batch_size": batch_size, "grad_accum": 2, "sampler": "shuffle",
                  "save_every": 1, "cpu_threads": 1},
    }


def whole_step(run: Path, cfg: RewardConfig) -> tuple[float, float]:
    """(accuracy, mean reward gap) of the saved model on every training pair, one pair at a time."""
    pairs = training_examples(load_pairs_from_config(cfg.data, run, verbose=False).pairs, cfg.data.max_train_per_env)
    assert len(pairs) == PAIRS
    model, processor = load_reward_model(run / "final")
    rows = [r["multimodal"] for r in score_pairs(model, processor, pairs, shared_prefix=False)]
    return sum(c > j for c, j in rows) / len(rows), sum(c - j for c, j in rows) / len(rows)


def logged(run: Path) -> dict:
    (row,) = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    return row


def test_one_process_logs_the_accuracy_of_every_micro_batch(tmp_path):
    cfg = validate_config(raw_config(batch_size=8), "test", RewardConfig)
    train_reward_model(cfg, tmp_path, progress=False)
    acc, gap = whole_step(tmp_path, cfg)
    row = logged(tmp_path)
    assert row["acc"] == pytest.approx(acc, abs=1e-12) and row["reward_gap"] == pytest.approx(gap, abs=1e-5)


@pytest.mark.distributed
def test_two_processes_log_the_accuracy_of_the_global_batch(tmp_path):
    config = tmp_path / "rm.yaml"
    config.write_text(yaml.safe_dump(raw_config(batch_size=4)))
    run = tmp_path / "run"
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run([str(torchrun), "--nproc_per_node", "2", "-m", "robustvlm.cli", "rm", "train", str(config),
                           "--out", str(run)], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    acc, gap = whole_step(run, validate_config(raw_config(4), "test", RewardConfig))
    row = logged(run)
    assert row["acc"] == pytest.approx(acc, abs=1e-12) and row["reward_gap"] == pytest.approx(gap, abs=1e-5)
