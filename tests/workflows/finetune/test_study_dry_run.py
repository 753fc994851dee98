"""`study --dry-run` prints the plan and trains nothing (issue 46.4: it trained three methods)."""

from __future__ import annotations

from pathlib import Path

import yaml
from bad_input import run_cli

import robustvlm.workflows.finetune.study as study
from robustvlm.configs import resolve


def _refuse(*args, **kwargs):
    raise AssertionError("a dry run trained or loaded something")


def test_dry_run_prints_every_run_and_the_budget_and_writes_nothing(tmp_path, monkeypatch, capsys):
    for name in ("train", "launched_train", "evaluate", "load_from_config"):
        monkeypatch.setattr(study, name, _refuse)
    monkeypatch.chdir(tmp_path)
    assert run_cli(["study", "configs/study_tasks.yaml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == [], "a dry run wrote files"
    spec = yaml.safe_load(Path(resolve("configs/study_tasks.yaml")).read_text())
    steps, batch = spec["base"]["train"]["steps"], spec["base"]["train"]["batch_size"]
    runs = [line.split("\t") for line in out.splitlines() if "\t" in line][1:]
    assert sorted((r[0], int(r[1])) for r in runs) == sorted((m, s) for m in spec["methods"] for s in spec["seeds"])
    assert {(r[3], r[5], r[6]) for r in runs} == {(spec["base"]["model"]["name"], str(steps), str(batch))}
    n = len(spec["methods"]) * len(spec["seeds"])
    assert (f"budget: {n} runs ({len(spec['methods'])} methods x {len(spec['seeds'])} seeds), "
            f"{n * steps:,} optimisation steps, {n * steps * batch:,} training examples") in out
    assert "nothing was trained" in out
