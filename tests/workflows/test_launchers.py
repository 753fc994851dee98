"""The job runner: local (in process or a CPU pool), the multi-GPU pool (device pinning) and
submitit; failures named after every job ended, finished jobs skipped, one progress bar."""

from __future__ import annotations

import os

import pytest
from sweep_jobs import device_and_process

from robustvlm.errors import ConfigError, RobustVLMError
from robustvlm.workflows.launchers import JobRunnerConfig, JobsFailed, run_jobs


def test_local_runs_in_this_process_in_order(tmp_path):
    out = run_jobs(device_and_process, [2, 0, 1], JobRunnerConfig(kind="local"), tmp_path, progress=False)
    assert [j for j, _, _ in out] == [2, 0, 1] and {pid for _, _, pid in out} == {os.getpid()}


def test_local_workers_run_a_pool_of_single_thread_processes():
    out = run_jobs(device_and_process, [3, 1, 2, 0], JobRunnerConfig(workers=2), progress=False)
    assert [j for j, _, _ in out] == [3, 1, 2, 0]  # job order, whatever order they finished in
    assert os.getpid() not in {pid for _, _, pid in out}


@pytest.mark.parametrize("cfg", [JobRunnerConfig(), JobRunnerConfig(workers=2)], ids=["in-process", "pool"])
def test_a_failed_job_is_named_after_the_others_finished(cfg):
    with pytest.raises(JobsFailed) as caught:
        run_jobs(device_and_process, [0, -1, 1, -2], cfg, name=lambda j: f"job {j}", desc="runs", progress=False)
    err = caught.value
    assert isinstance(err, RobustVLMError)  # the CLI prints it as one `error:` line
    assert str(err).startswith("2 of 4 runs failed (job -1: job -1 fails on purpose; job -2: job -2 fails on purpose)")
    assert "the finished runs are kept: re-run the same command to resume" in str(err)
    assert [r[0] for r in err.results[::2]] == [0, 1]  # the others ran to the end
    assert isinstance(err.__cause__, ValueError)  # the first failure, with its traceback


def test_done_jobs_are_skipped_and_counted_on_the_one_bar(capsys):
    ran = []
    out = run_jobs(ran.append, [0, 1, 2, 3], done=lambda j: j % 2 == 0, desc="runs")
    assert ran == [1, 3] and out == [None, None, None, None]
    bar = capsys.readouterr().err
    assert "runs: 100%" in bar and "4/4" in bar and "2/4" in bar  # starts at the finished count


def test_kept_results_are_read_back_and_only_failed_jobs_run_again(tmp_path):
    store = tmp_path / "kept"
    with pytest.raises(JobsFailed, match="1 of 3 jobs failed"):
        run_jobs(device_and_process, [0, -1, 1], JobRunnerConfig(workers=2), store=store, progress=False)
    assert len(list(store.glob("*.pkl"))) == 2  # each kept as it ended; the failure was not
    first = run_jobs(device_and_process, [0, 1], store=store, progress=False)
    assert os.getpid() not in {pid for _, _, pid in first}  # read back, not run here again
    assert run_jobs(device_and_process, [2], store=store, progress=False)[0][2] == os.getpid()


def test_multi_gpu_pins_one_device_per_worker_and_hands_back_failures(tmp_path):
    cfg = JobRunnerConfig(kind="multi-gpu", gpus=[5, 7])
    with pytest.raises(JobsFailed, match="1 of 5 jobs failed") as caught:
        run_jobs(device_and_process, [0, 1, 2, 3, -1], cfg, tmp_path, progress=False)
    out = caught.value.results
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
        run_jobs(device_and_process, [0], JobRunnerConfig(kind="multi-gpu"), tmp_path, progress=False)


def test_submitit_bad_parameter_names_the_key(tmp_path):
    cfg = JobRunnerConfig(kind="slurm", cluster="debug", parameters={"no_such_parameter": 1})
    with pytest.raises(ConfigError, match="launcher.parameters"):
        run_jobs(device_and_process, [0], cfg, tmp_path, progress=False)
