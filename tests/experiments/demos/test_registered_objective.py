"""An objective registered in `objectives.REGISTRY` (by robustvlm or a plugin) reaches every demo's
plan and report without another edit: its name, label and colour come from the registry."""

from __future__ import annotations

import copy
import json

import pytest

from robustvlm.objectives import REGISTRY
from robustvlm.objectives.erm import ERM


class Dummy(ERM):
    """ERM under another name: a stand-in for an objective added after the demos were written."""

    name = "dummy"
    label = "Dummy objective"
    colour = "C8"


@pytest.fixture
def dummy(monkeypatch):
    monkeypatch.setitem(REGISTRY, Dummy.name, Dummy)
    return Dummy


def test_the_invariance_demo_trains_and_reports_a_registered_objective(dummy, tmp_path):
    from robustvlm.experiments.invariance.run import run_invariance_demo
    from robustvlm.linear.protocol import all_methods, linear_methods

    assert "dummy" in linear_methods() and "dummy" in all_methods()
    results = run_invariance_demo(tmp_path, budget="quick", methods=("erm", "dummy"), progress=False)
    assert results.methods == ["erm", "dummy"]
    assert all(0 <= results.results[ex]["dummy"].mean < 100 for ex in results.results)  # it trained
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    verdict = report.split("## Verdict")[1].split("\n## ")[0]
    assert "| Dummy objective | ours |" in report and "Dummy objective" in verdict
    saved = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert saved["methods"] == ["erm", "dummy"]


def test_the_ladder_plans_and_reports_a_registered_objective(dummy, tmp_path, monkeypatch):
    from robustvlm.experiments.ladder import report
    from robustvlm.experiments.ladder.readings import summary_from_dict
    from robustvlm.experiments.ladder.run import ladder_methods, method_hparams

    assert ladder_methods()[-2:] == ("dummy", "oracle") and method_hparams(20)["dummy"] == {}
    assert "groupdro" not in ladder_methods()  # no penalty schedule: off the ladder
    entry = {"n_seeds": 1, "n_diverged": 0, "rule": "colour",
             "worst": {"mean": 0.1, "std": 0.0, "n": 1},
             **{reading: {"test-nocolour": {"mean": 0.5, "std": 0.0, "n": 1, "values": {"0": 0.5}},
                          "test-reversed": {"mean": 0.1, "std": 0.0, "n": 1, "values": {"0": 0.1}}}
                for reading in ("final", "training-domain", "oracle")}}
    summary = summary_from_dict({"mnist/pixels": {"erm": entry, "dummy": copy.deepcopy(entry)}})
    assert [row[0] for row in report.summary_table(summary, "final").rows] == ["ERM", "Dummy objective"]
    assert [row[0] for row in report.cell_table(summary["mnist/pixels"], []).rows] == ["ERM", "Dummy objective"]
    colours = []
    monkeypatch.setattr("matplotlib.axes.Axes.bar", lambda self, *a, **k: colours.append((k["label"], k["color"])))
    report.ladder_plot(summary, tmp_path / "ladder.png")
    assert colours == [("ERM", "C0"), ("Dummy objective", "C8")]


@pytest.mark.slow
def test_the_tasks_demo_and_the_study_plan_and_report_a_registered_objective(dummy, tmp_path):
    from robustvlm.experiments.tasks.run import demo_spec, run_demo
    from robustvlm.workflows.finetune.study import study_runs

    for zoo in (False, True):
        plan = study_runs(demo_spec(quick=True, zoo=zoo, methods=["erm", "dummy"]))
        assert list(plan.runs) == ["erm", "dummy"] and plan.runs["dummy"][0].method == "dummy"
    overrides = ["train.steps=2", "train.save_every=2", "data.n_per_env=8", "eval.max_per_env=1"]
    results = run_demo(tmp_path, quick=True, overrides=overrides, methods=["erm", "dummy"])
    assert list(results.scores.methods) == ["erm", "dummy"] and results.runs["dummy"].method == "dummy"
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "dummy (Dummy objective)" in report and "| dummy |" in report.split("## Table 1")[1]
    saved = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert saved["methods"]["dummy"]["method"] == "dummy"


def test_the_tasks_demo_refuses_an_objective_nobody_registered():
    from robustvlm.errors import ConfigError
    from robustvlm.experiments.tasks.run import demo_spec

    with pytest.raises(ConfigError, match="unknown objective.*'nope'"):
        demo_spec(methods=["erm", "nope"])
