"""The figure registry (`figures.registry`) gathers each experiment's figures from its own package
and the measurement commands' from `report.figure_tables`, refusing a name declared twice."""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from types import SimpleNamespace

import pytest

from robustvlm.experiments import EXPERIMENTS
from robustvlm.figures import registry
from robustvlm.report import figure_tables


def test_each_experiments_figures_come_from_its_own_package():
    declared = set()
    for name in EXPERIMENTS:
        if find_spec(f"robustvlm.experiments.{name}.figures") is None:
            continue
        own = import_module(f"robustvlm.experiments.{name}.figures")
        for figure, (command, _) in own.FIGURES.items():
            assert registry.FIGURES[figure] is own.FIGURES[figure]
            if command.startswith("demo "):  # a demo's figure belongs to the experiment that makes it
                assert command.split()[1] == name, (figure, command)
                declared.add(figure)
        assert set(own.IMAGES) <= set(own.FIGURES) and set(own.OWN_TEST_FIGURES) <= set(own.FIGURES)
    assert declared == {f for f, (command, _) in registry.FIGURES.items() if command.startswith("demo ")}


def test_the_commands_figures_are_gathered_too():
    assert all(registry.FIGURES[n] is figure_tables.FIGURES[n] for n in figure_tables.FIGURES)
    assert set(registry.IMAGES) <= set(registry.FIGURES)


def test_a_figure_declared_twice_is_refused(monkeypatch):
    one = SimpleNamespace(__name__="one", FIGURES={"f": ("demo x", None)})
    two = SimpleNamespace(__name__="two", FIGURES={"f": ("demo y", None)})
    monkeypatch.setattr(registry, "_declaring_modules", lambda: [one, two])
    with pytest.raises(ValueError, match="'f' is declared twice"):
        registry._gathered("FIGURES")
