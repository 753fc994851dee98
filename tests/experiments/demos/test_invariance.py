"""demo invariance end to end, and its worker processes."""

from __future__ import annotations

import json
import shutil

import pytest
from report_checks import assert_opens_with_verdict, assert_smoke_verdict_only

from robustvlm.cli import main
from robustvlm.data.synth.linear_unit_tests import EXAMPLES
from robustvlm.linear.protocol import METHODS, Protocol
from robustvlm.workflows.launchers import JobRunnerConfig


def test_demo_invariance_quick_writes_the_report_and_resumes(quick_demo, tmp_path, monkeypatch):
    out = tmp_path / "inv"
    shutil.copytree(quick_demo("invariance"), out)  # resumed below: a copy of the session's shared run
    summary = json.loads((out / "results.json").read_text())
    assert set(summary["results"]) == set(EXAMPLES)
    assert all(set(summary["results"][ex]) == set(METHODS) for ex in EXAMPLES)
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(rows) == len(EXAMPLES) * len(METHODS) * 2  # quick: 2 draws x 1 seed
    assert_opens_with_verdict(out)
    report = (out / "report.md").read_text()
    assert_smoke_verdict_only(report, "Linear unit tests of invariance")
    assert (
        "| IRMv1 | published | 11.15 ± 0.71 |" in report
    )  # the shipped reference, read at run time
    assert "| Dynamic BIRM | ours |" in report and "## Against the published spread" in report
    assert summary["within_spread"]["Example1"]["erm"]["within"] in (True, False)
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2 and "](" not in html

    # every model was kept as it finished: a re-run (after a kill) trains nothing again
    def no_training(*args, **kwargs):
        raise AssertionError("a kept model was trained again")

    monkeypatch.setattr("robustvlm.experiments.invariance.run.run_cell", no_training)
    assert len(list((out / "jobs").glob("*.pkl"))) == len(EXAMPLES) * len(METHODS)  # one per cell
    assert main(["demo", "invariance", "--quick", "--out", str(out)]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["results"] == summary["results"] and again["lambda"] == summary["lambda"]


def test_worker_processes_give_the_same_runs_as_one_process():
    from robustvlm.experiments.invariance.run import train_models

    protocol = Protocol(n_per_env=50, steps=20, n_draws=2, n_seeds=2)
    cells = [("Example1", "irm", 0), ("Example2s", "dynamic_birm", 0), ("Example3", "oracle", 0)]
    inline = train_models(cells, protocol, launcher=JobRunnerConfig(), progress=False)
    assert len(inline) == 3 * 2 * 2
    assert train_models(cells, protocol, launcher=JobRunnerConfig(workers=2), progress=False) == inline
    assert inline["Example2s", "dynamic_birm", 1, 0].trace and not inline["Example1", "irm", 1, 0].trace


def test_a_subset_of_methods_a_launcher_file_and_a_setting_without_a_published_row(tmp_path):
    launcher = tmp_path / "launcher.yaml"
    launcher.write_text("kind: local\nworkers: 1\n")
    out = tmp_path / "inv"
    argv = ["demo", "invariance", "--budget", "quick", "--n-envs", "4", "--dim-spu", "2",
            "--methods", "irm_eiil,irm,erm", "--launcher", str(launcher), "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads((out / "results.json").read_text())
    assert summary["methods"] == ["erm", "irm", "irm_eiil"] and summary["reference"] is None
    assert summary["within_spread"] is None and summary["launcher"]["workers"] == 1
    assert set(summary["purity"]) == set(EXAMPLES) and all(0.25 <= v <= 1 for v in summary["purity"].values())
    report = (out / "report.md").read_text()
    assert "No published row for this setting (4 environments" in report and "| BIRM |" not in report
    assert "## Environments inferred by EIIL" in report and "| IRMv1, EIIL environments | ours |" in report


def test_jobs_cover_every_data_seed_once():
    from robustvlm.experiments.invariance.run import SEEDS_PER_JOB, cell_jobs

    jobs = cell_jobs(("Example1", "Example2"), ("erm",), 50)
    assert len(jobs) == 2 * 13 and jobs[:2] == [("Example1", "erm", 0), ("Example1", "erm", SEEDS_PER_JOB)]
    assert sorted(s for ex, _, first in jobs if ex == "Example2"
                  for s in range(first, min(first + SEEDS_PER_JOB, 50))) == list(range(50))


def test_bad_budget_methods_and_launcher_are_refused(tmp_path, capsys):
    from robustvlm.errors import ConfigError
    from robustvlm.experiments.invariance.run import run_invariance_demo

    for kwargs, message in [({"budget": "huge"}, "unknown budget 'huge'"),
                            ({"methods": ("erm", "andmask")}, "unknown methods \\['andmask'\\]")]:
        with pytest.raises(ConfigError, match=message):
            run_invariance_demo(tmp_path / "x", **kwargs)
    bad = tmp_path / "launcher.yaml"
    bad.write_text("kind: local\nworkerz: 2\n")
    assert main(["demo", "invariance", "--quick", "--launcher", str(bad), "--out", str(tmp_path / "y")]) != 0
    assert "workerz: unknown key" in capsys.readouterr().err


def test_the_shipped_slurm_launcher_is_a_valid_job_runner_config():
    from pathlib import Path

    from robustvlm.config import read_yaml_mapping, validate_config

    path = Path(__file__).resolve().parents[3] / "configs" / "launchers" / "slurm_invariance.yaml"
    config = validate_config(read_yaml_mapping(path), str(path), JobRunnerConfig)
    assert config.kind == "slurm" and config.parameters["cpus_per_task"] == 1
