"""The zoo robustness figures of the Results pages: how each table and picture is made from
`demo robustness --zoo`'s results.json (`figures.registry` gathers them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from robustvlm.experiments.robustness.zoo_report import (
    ZooRobustnessResults,
    er_table,
    fits_table,
    members_table,
    task_signal_table,
)
from robustvlm.report.line_scatter import shifts_grid
from robustvlm.report.page import Table


def _zoo(table: Callable[[ZooRobustnessResults], Table]) -> Callable[[Mapping], Table]:
    """A table of the results read back through their class."""
    return lambda results: table(ZooRobustnessResults.from_dict(results))


def _lines(results: Mapping, path: Path) -> Path:
    """Per shift, every member against the dual encoders' probit line."""
    zoo = ZooRobustnessResults.from_dict(results)
    return shifts_grid({s: r.dual_line for s, r in zoo.shifts.items()}, path,
                       title=f"Shifted vs {zoo.reference} accuracy, probit axes: the dual encoders' line and every "
                             f"member ({zoo.n_questions} questions per style, chance {zoo.chance:.0%})")


#: figure name -> (the demo that writes its results.json, the table made from it)
FIGURES: dict[str, tuple[str, Callable[[Mapping], Table]]] = {
    "zoo-robustness-members": ("demo robustness --zoo", _zoo(members_table)),
    "zoo-robustness-fits": ("demo robustness --zoo", _zoo(fits_table)),
    "zoo-robustness-er": ("demo robustness --zoo", _zoo(er_table)),
    "zoo-task-signal": ("demo robustness --zoo", _zoo(task_signal_table)),
    "zoo-robustness-corruptions": ("demo robustness --zoo", _zoo(lambda results: fits_table(results, corruptions=True))),
    "zoo-robustness-corruptions-er": ("demo robustness --zoo",
                                      _zoo(lambda results: er_table(results, corruptions=True))),
}
#: figure name -> draws its picture from the same results
IMAGES: dict[str, Callable[[Mapping, Path], Path | None]] = {"zoo-robustness-fits": _lines}
#: figures whose quick tables the zoo robustness test module checks
OWN_TEST_FIGURES = tuple(FIGURES)
