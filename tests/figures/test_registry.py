"""The figure registry (`figures.registry`) gathers each experiment's figures from its own package
and the measurement commands' from `report.figure_tables`, refusing a name declared twice."""

from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace

import pytest

from robustvlm.experiments import EXPERIMENTS
from robustvlm.figures import registry
from robustvlm.report import figure_tables


def test_each_experiments_figures_come_from_its_own_package():
    for name, experiment in EXPERIMENTS.items():
        if not experiment.figures:
            continue
        own = import_module(f"robustvlm.experiments.{name}.figures")
        demo_figures = {n for n, (command, _) in own.FIGURES.items() if command.startswith("demo ")}
        assert set(experiment.figures) == demo_figures, name
        assert all(registry.FIGURES[n] is own.FIGURES[n] for n in own.FIGURES)
        assert set(own.IMAGES) <= set(own.FIGURES) and set(own.OWN_TEST_FIGURES) <= set(own.FIGURES)


def test_the_commands_figures_are_gathered_too():
    assert all(registry.FIGURES[n] is figure_tables.FIGURES[n] for n in figure_tables.FIGURES)
    assert set(registry.IMAGES) <= set(registry.FIGURES)


def test_a_figure_declared_twice_is_refused(monkeypatch):
    one = SimpleNamespace(__name__="one", FIGURES={"f": ("demo x", None)})
    two = SimpleNamespace(__name__="two", FIGURES={"f": ("demo y", None)})
    monkeypatch.setattr(registry, "_declaring_modules", lambda: [one, two])
    with pytest.raises(ValueError, match="'f' is declared twice"):
        registry._gathered("FIGURES")
