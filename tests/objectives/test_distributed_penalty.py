"""Two gloo processes on halves of a global batch equal one process on the whole batch."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from distributed_objectives_worker import CASES, run_all

WORKER = Path(__file__).resolve().parents[1] / "helpers" / "distributed_objectives_worker.py"

pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory):
    if (
        importlib.util.find_spec("torch.distributed.run") is None
        or not torch.distributed.is_available()
    ):
        pytest.skip("torchrun (torch.distributed.run) is not available")
    path = tmp_path_factory.mktemp("dist") / "results.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(WORKER),
        str(path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return torch.load(path)


@pytest.mark.parametrize("label", sorted(CASES))
def test_two_processes_match_one_process_on_the_global_batch(two_process_results, label):
    single = run_all(rank=0, world_size=1)[label]
    for step_single, step_dist in zip(single, two_process_results[label], strict=True):
        row_single, row_dist = step_single["row"], step_dist["row"]
        assert row_dist.keys() == row_single.keys()
        for key, value in row_single.items():
            assert row_dist[key] == pytest.approx(value, rel=1e-5, abs=1e-8), key
        for g_single, g_dist in zip(step_single["grads"], step_dist["grads"], strict=True):
            torch.testing.assert_close(g_dist, g_single, rtol=1e-5, atol=1e-8)
    assert row_single["R_inv"] > 0 or label == "groupdro"


def test_local_halves_alone_would_differ():
    """The comparison can fail: one rank's half on its own gives other penalties and risks."""
    single = run_all(rank=0, world_size=1)
    half = run_all(rank=0, world_size=2)  # rank 0's half, no process group: no all-reduce
    for label in ("irm", "vrex", "birm"):
        assert half[label][0]["row"]["R_inv"] != pytest.approx(
            single[label][0]["row"]["R_inv"], rel=1e-3
        )
