"""The experiment registry (`experiments`): every demo one `Experiment` whose plan makes
its command line, whose method lists come from the objective registry, and whose figures are the
ones `figures.write` says its results make."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from dataclasses import fields, replace
from pathlib import Path

import pytest

from robustvlm.cli import build_parser
from robustvlm.experiments import EXPERIMENTS, option_spec, verdict_lines
from robustvlm.experiments.base import option_fields
from robustvlm.objectives import EVERY_EXPERIMENT, REGISTRY
from robustvlm.objectives.erm import ERM

ROOT = Path(__file__).resolve().parents[2]


class Dummy(ERM):
    """ERM under another name, declaring it applies to every experiment: an objective added later."""

    name = "dummy"
    label = "Dummy objective"
    applies_to = EVERY_EXPERIMENT


@pytest.fixture
def dummy(monkeypatch):
    monkeypatch.setitem(REGISTRY, Dummy.name, Dummy)


def _with_methods() -> list[str]:
    return [name for name, e in EXPERIMENTS.items() if "methods" in {f.name for f in fields(e.plan)}]


def test_the_experiments_that_train_objectives_take_methods():
    assert {"tasks", "invariance", "ladder"} <= set(_with_methods())  # a new demo may add itself
    assert all(EXPERIMENTS[name].methods is not None for name in _with_methods())


def test_a_registered_objective_reaches_every_default_method_list(dummy, monkeypatch):
    from robustvlm.experiments.ladder.run import ladder_methods
    from robustvlm.experiments.tasks.run import demo_spec

    for name in _with_methods():
        experiment = EXPERIMENTS[name]
        assert "dummy" in experiment.resolved(experiment.default_plan()).methods, name
    assert "dummy" in ladder_methods()  # the default demo trains the ladder's methods
    for zoo in (False, True):  # the packaged study configs' method lists
        assert "dummy" in demo_spec(zoo=zoo)["methods"] and "dummy" in demo_spec(quick=True, zoo=zoo)["methods"]


def test_a_registered_objective_is_in_the_help_and_the_generated_reference(dummy, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    for name in _with_methods():
        parser = _demo_parser(name)
        assert "dummy" in parser.format_help(), name
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "tools" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs)
    page = docs.cli_page()
    for name in _with_methods():
        section = page.split(f"## robustvlm demo {name}\n")[1].split("\n## ")[0]
        assert "dummy" in section, name


def _demo_parser(name: str) -> argparse.ArgumentParser:
    demo = _subcommands(build_parser())["demo"]
    return _subcommands(demo)[name]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(dict(a.choices) for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_an_objective_that_does_not_apply_is_left_out(monkeypatch):
    class Narrow(ERM):
        name = "narrow"
        label = "Narrow"
        applies_to = frozenset({"invariance"})

    monkeypatch.setitem(REGISTRY, Narrow.name, Narrow)
    resolved = {n: EXPERIMENTS[n].resolved(EXPERIMENTS[n].default_plan()).methods for n in _with_methods()}
    assert "narrow" in resolved["invariance"] and "narrow" not in resolved["ladder"] + resolved["tasks"]


def test_every_option_has_help_and_every_preset_is_a_plan():
    for name, experiment in EXPERIMENTS.items():
        assert "default" in experiment.presets
        for preset in experiment.presets.values():
            assert isinstance(preset, experiment.plan), name
        assert option_fields(experiment.plan), name
        for plan_field in option_fields(experiment.plan):
            assert option_spec(plan_field).help, (name, plan_field.name)


def test_the_flags_select_the_presets_and_the_options_given_replace_their_values():
    from robustvlm.cli.plan_options import plan_from
    from robustvlm.experiments.ladder.plan import PRESETS, QUICK, ZOO_QUICK

    ladder = EXPERIMENTS["ladder"]
    assert ladder.flags() == ("quick", "zoo") and EXPERIMENTS["invariance"].flags() == ("quick",)
    assert {(p.quick, p.zoo): ladder.preset(quick=p.quick, zoo=p.zoo) for p in PRESETS.values()} == {
        (p.quick, p.zoo): p for p in PRESETS.values()}
    parser = _demo_parser("ladder")
    assert plan_from(parser.parse_args(["--quick"]), ladder) == QUICK
    assert plan_from(parser.parse_args(["--quick", "--seeds", "3,4"]), ladder) == replace(QUICK, seeds=(3, 4))
    assert plan_from(parser.parse_args(["--zoo", "--quick", "--modes", "full"]), ladder) == replace(
        ZOO_QUICK, modes=("full",))
    tasks = EXPERIMENTS["tasks"]  # no preset joins --zoo and --quick: the default one with both set
    assert tasks.preset(quick=True, zoo=True) == replace(tasks.default_plan(), quick=True, zoo=True)


def test_every_dependency_is_a_source_module():
    for experiment in EXPERIMENTS.values():
        assert experiment.depends_on
        for module in experiment.depends_on:
            assert importlib.util.find_spec(module) is not None, module


def test_the_verdict_printed_is_the_reports_first_verdict_lines(tmp_path):
    report = tmp_path / "report.md"
    report.write_text("# Title\n\n## Verdict\n\nfirst\n\n- second\n\n## Details\n\nnot this\n", encoding="utf-8")
    assert verdict_lines(report) == [f"verdict ({report}):", "first", "- second"]
    assert verdict_lines(tmp_path / "absent.md") == []


def test_each_preset_writes_where_the_demo_always_wrote():
    folders = {(name, preset): e.out(plan) for name, e in EXPERIMENTS.items() for preset, plan in e.presets.items()}
    built_in = {name for name, _ in ALWAYS_WROTE}  # a new demo's presets write where it says
    assert {k: v for k, v in folders.items() if k[0] in built_in} == ALWAYS_WROTE


ALWAYS_WROTE = {
    ("default", "default"): "demo_out", ("default", "quick"): "demo_out_quick",
    ("tasks", "default"): "demo_tasks", ("tasks", "quick"): "demo_tasks_quick", ("tasks", "zoo"): "demo_tasks_zoo",
    ("robustness", "default"): "demo_robustness", ("robustness", "quick"): "demo_robustness",
    ("robustness", "zoo"): "demo_robustness_zoo",
    ("invariance", "default"): "demo_invariance", ("invariance", "quick"): "demo_invariance",
    ("invariance", "paper"): "demo_invariance",
    ("ladder", "default"): "demo_ladder", ("ladder", "quick"): "demo_ladder_quick", ("ladder", "zoo"): "demo_ladder_zoo",
    ("ladder", "zoo-quick"): "demo_ladder_zoo_quick",
    ("reward", "default"): "demo_reward", ("reward", "quick"): "demo_reward_quick", ("reward", "zoo"): "demo_reward_zoo",
}
"""The built-in demos' output folder per preset, as they have always been (scripts and docs name them)."""
