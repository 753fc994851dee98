"""Bad input to the job runner (`workflows.launchers`), through `robustvlm sweep`'s `launcher:`
section and `--launcher`, and a job that fails: 7 kinds. Each stops with one `error:` line naming
the file and key (or the failed job and its error), and a folder of an earlier run stays as it
was."""

from __future__ import annotations

import copy

import pytest
import yaml
from bad_input import expect_clean_failure

SWEEP = {
    "base": {
        "model": {"name": "tiny:idefics3", "trainable": "full", "tiny": {"hidden_size": 32, "vocab_size": 300}},
        "data": {"benchmark": "spurious", "n_per_env": 8},
        "train": {"steps": 2, "lr": 3e-3, "batch_size": 4, "cpu_threads": 1},
        "eval": {"batch_size": 16, "max_new_tokens": 4, "max_per_env": 4, "metrics": ["exact"]},
    },
    "methods": {"erm": {"method": "erm"}},
    "n_draws": 1,
}


@pytest.fixture
def earlier(tmp_path):
    """A folder of an earlier run that no failure may touch."""
    folder = tmp_path / "earlier"
    folder.mkdir()
    (folder / "results.json").write_text('{"done": true}\n')
    return folder


def sweep_config(tmp_path, launcher: dict | None, **base) -> str:
    spec = copy.deepcopy(SWEEP)
    if launcher is not None:
        spec["launcher"] = launcher
    spec["base"]["model"].update(base)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@pytest.mark.parametrize(
    ("launcher", "mentions"),
    [
        ({"kind": "cloud"}, ["sweep.yaml", "launcher.kind", "'local'"]),
        ({"workers": 0}, ["sweep.yaml", "launcher.workers", "greater than or equal to 1"]),
        ({"nodes": 4}, ["sweep.yaml", "launcher.nodes"]),
        ({"kind": "multi-gpu", "gpus": []}, ["multi-gpu found no GPU", "launcher.workers"]),
        ({"kind": "slurm", "cluster": "debug", "parameters": {"no_such_parameter": 1}},
         ["launcher.parameters", "no_such_parameter"]),
    ],
    ids=["unknown-kind", "zero-workers", "unknown-key", "multi-gpu-without-gpus", "bad-submitit-parameter"],
)
def test_bad_launcher_section(tmp_path, capsys, earlier, launcher, mentions):
    config = sweep_config(tmp_path, launcher)
    expect_clean_failure(["sweep", config, "--out", str(tmp_path / "out")], capsys,
                         mentions=mentions, untouched=earlier)


def test_unknown_launcher_option(tmp_path, capsys, earlier):
    config = sweep_config(tmp_path, None)
    expect_clean_failure(["sweep", config, "--launcher", "cloud", "--out", str(tmp_path / "out")], capsys,
                         mentions=["--launcher", "invalid choice: 'cloud'"], untouched=earlier)


def test_a_failed_job_is_named(tmp_path, capsys, earlier):
    config = sweep_config(tmp_path, None, name="tiny:nonsense")
    expect_clean_failure(["sweep", config, "--out", str(tmp_path / "out")], capsys,
                         mentions=["1 of 1 runs failed", "erm draw 0 seed 0", "nonsense", "re-run the same command"],
                         untouched=earlier)

