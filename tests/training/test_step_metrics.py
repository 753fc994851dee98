"""The logged row of a step is the mean over its micro-batches and processes, checked against the
full-batch loss and hit rate computed independently in one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file
from toy_tasks import RegressionTask

from robustvlm.config import TrainConfig
from robustvlm.training.loop import run_training
from robustvlm.training.metrics import mean_rows

WORKER = Path(__file__).resolve().parents[1] / "helpers" / "step_metrics_worker.py"


def full_batch(final: Path) -> tuple[float, float]:
    """(mean squared error, share within 1) of the final linear model on all 40 examples."""
    weights, task = load_file(str(final / "linear.safetensors")), RegressionTask()
    err = task.x @ weights["weight"][0] + weights["bias"][0] - task.y
    return float((err**2).mean()), float((err.abs() < 1).double().mean())


def logged(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


# lr 0: the weights stay at their start, so the final model scores every logged step; each step
# is one epoch (40 examples = batch x processes x grad_accum), so its full batch is all the data.
def config(batch_size: int) -> TrainConfig:
    return TrainConfig(steps=2, lr=0.0, batch_size=batch_size, grad_accum=2, save_every=2, cpu_threads=1)


def test_mean_rows_averages_each_name_over_the_rows_holding_it():
    rows = [{"loss": 1.0, "risk/a": 2.0, "lambda": 0.1}, {"loss": 2.0, "risk/b": 4.0, "lambda": 0.1},
            {"loss": 4.5, "risk/a": 3.0, "lambda": 0.1}]
    assert mean_rows(rows) == {"loss": 2.5, "risk/a": 2.5, "lambda": 0.1, "risk/b": 4.0}
    third = 0.1 + 0.2  # equal values are kept exactly, not re-summed and divided
    assert mean_rows([{"w": third}] * 3)["w"] == third


def test_accumulated_step_logs_the_mean_of_its_micro_batches(tmp_path):
    cfg = config(batch_size=20)
    run_training(RegressionTask(), cfg, tmp_path, settings={"train": cfg.model_dump(mode="json")}, progress=False)
    loss, hit = full_batch(tmp_path / "final")
    for row in logged(tmp_path):
        assert row["loss"] == pytest.approx(loss, rel=1e-6), row  # not the last micro-batch's
        assert row["hit"] == pytest.approx(hit, abs=1e-12)
    assert [r["calls"] for r in logged(tmp_path)] == [1.5, 3.5]  # calls 1, 2 then 3, 4


@pytest.mark.distributed
def test_two_processes_log_the_full_batch_loss(tmp_path):
    cfg = config(batch_size=10)  # per process
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run(
        [str(torchrun), "--nproc_per_node", "2", str(WORKER), str(tmp_path), cfg.model_dump_json()],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loss, hit = full_batch(tmp_path / "final")
    rows = logged(tmp_path)
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["loss"] == pytest.approx(loss, rel=1e-6), row
        assert row["hit"] == pytest.approx(hit, abs=1e-12)
