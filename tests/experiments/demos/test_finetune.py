"""`robustvlm demo tasks`: the packaged study config, --quick, overrides, and a tiny end-to-end run."""

from __future__ import annotations

import json

import torch
from report_checks import assert_opens_with_verdict, assert_smoke_verdict_only

from robustvlm.cli import main
from robustvlm.experiments.tasks.run import TITLE, demo_spec
from robustvlm.workflows.finetune.study import study_runs

torch.set_num_threads(1)


def test_full_demo_is_the_three_seed_tasks_study():
    plan = study_runs(demo_spec())
    assert list(plan.runs) == ["erm", "birm", "dynamic_birm"] and plan.seeds == [0, 1, 2]
    assert plan.metrics == ["chrf", "bertscore", "cee"]
    cfg = plan.runs["dynamic_birm"][2]
    assert cfg.data.benchmark == "tasks" and cfg.model.name == "tiny:idefics3"
    assert cfg.method_args == {"seed": 2, "k_skip": 200} and cfg.train.seed == 2


def test_quick_merges_over_the_full_demo_and_overrides_reach_base():
    plan = study_runs(demo_spec(quick=True, overrides=["train.lr=0.01"]))
    assert plan.seeds == [0]
    cfg = plan.runs["birm"][0]
    assert (cfg.train.steps, cfg.train.lr, cfg.data.n_per_env) == (250, 0.01, 60)
    assert cfg.method_args["anneal_steps"] == 50 and cfg.method_args["lambda"] == 10.0


def test_demo_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    overrides = ["train.steps=2", "train.save_every=2", "data.n_per_env=8", "eval.max_per_env=1"]
    assert main(["demo", "tasks", "--quick", "--out", str(out), *overrides]) == 0
    printed = capsys.readouterr().out
    assert "| method | ID chrF | ID BERTScore | ID CEE |" in printed and "cee: absent" in printed
    results = json.loads((out / "results.json").read_text())
    assert list(results["methods"]) == ["erm", "birm", "dynamic_birm"]
    assert_opens_with_verdict(out)
    assert_smoke_verdict_only((out / "report.md").read_text(), TITLE)
