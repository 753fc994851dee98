"""Every figure of the Results pages, gathered from the modules that declare them: each
experiment's package (`experiments.NAME.figures`, for the experiments that have figures) and the
measurement commands' (`report.figure_tables`). A new experiment's figures are its own
`figures.py`; nothing here changes.

Each declaring module holds `FIGURES` (name -> (the command that writes its results, the table
made from them)), `IMAGES` (name -> the function drawing its picture from the same results) and
`OWN_TEST_FIGURES` (the names whose quick tables its test module checks, docs/quick_figures.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType

from robustvlm.experiments import PACKAGES
from robustvlm.report import figure_tables
from robustvlm.report.page import Table


def _declaring_modules() -> list[ModuleType]:
    """The experiments' figure modules (in `PACKAGES` order), then the commands'."""
    names = [f"robustvlm.experiments.{p}.figures" for p in PACKAGES]
    return [*(import_module(n) for n in names if find_spec(n) is not None), figure_tables]


def _gathered(attribute: str) -> dict:
    """{name: value} of every declaring module's `attribute`; a name declared twice is an error."""
    found: dict = {}
    for module in _declaring_modules():
        for name, value in getattr(module, attribute).items():
            if name in found:
                raise ValueError(f"figure {name!r} is declared twice ({module.__name__})")
            found[name] = value
    return found


#: figure name -> (the command that writes its results, the table made from them)
FIGURES: dict[str, tuple[str, Callable[[Mapping], Table]]] = _gathered("FIGURES")
#: figure name -> draws its picture from the results its table is made from
IMAGES: dict[str, Callable[[Mapping, Path], Path | None]] = _gathered("IMAGES")
OWN_TEST_FIGURES: tuple[str, ...] = tuple(n for m in _declaring_modules() for n in m.OWN_TEST_FIGURES)
"""Figures whose quick tables (docs/quick_figures.md) the test module of their experiment checks,
on the quick run it makes anyway (the zoo demos' need the quick zoo built)."""
