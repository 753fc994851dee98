"""Sweep launchers: local, the multi-GPU process pool (device pinning) and submitit."""

from __future__ import annotations

import os

import pytest
from sweep_jobs import device_and_process

from robustvlm.errors import ConfigError
from robustvlm.workflows.launchers import LauncherConfig, run_jobs


def test_local_runs_in_this_process_in_order(tmp_path):
    out = run_jobs(device_and_process, [2, 0, 1], LauncherConfig(kind="local"), tmp_path)
    assert [j for j, _, _ in out] == [2, 0, 1] and {pid for _, _, pid in out} == {os.getpid()}


def test_multi_gpu_pins_one_device_per_worker_and_hands_back_failures(tmp_path):
    cfg = LauncherConfig(kind="multi-gpu", gpus=[5, 7])
    out = run_jobs(device_and_process, [0, 1, 2, 3, -1], cfg, tmp_path)
    assert isinstance(out[-1], ValueError)  # a failed job does not stop the others
    done = out[:-1]
    assert [j for j, _, _ in done] == [0, 1, 2, 3]
    assert os.getpid() not in {pid for _, _, pid in done}
    by_process = {}
    for _, device, pid in done:
        by_process.setdefault(pid, set()).add(device)
    # every worker sees one GPU of its own, for all its jobs
    assert all(len(d) == 1 for d in by_process.values()) and set().union(*by_process.values()) <= {
        "5",
        "7",
    }


def test_multi_gpu_without_gpus_needs_workers(tmp_path, monkeypatch):
    import robustvlm.workflows.launchers as launchers

    monkeypatch.setattr(launchers, "_visible_gpus", lambda: [])
    with pytest.raises(ConfigError, match="launcher.workers"):
        run_jobs(device_and_process, [0], LauncherConfig(kind="multi-gpu"), tmp_path)


def test_submitit_bad_parameter_names_the_key(tmp_path):
    cfg = LauncherConfig(kind="slurm", cluster="debug", parameters={"no_such_parameter": 1})
    with pytest.raises(ConfigError, match="launcher.parameters"):
        run_jobs(device_and_process, [0], cfg, tmp_path)
