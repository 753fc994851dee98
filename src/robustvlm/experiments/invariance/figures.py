"""The linear unit tests' figures of the Results pages: how each table and picture is made from
`demo invariance`'s results.json (`figures.registry` gathers them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from robustvlm.errors import ConfigError
from robustvlm.experiments.invariance.report import (
    bar_chart,
    error_table,
    inferred_envs_table,
    spread_grid_table,
)
from robustvlm.experiments.invariance.results import InvarianceResults
from robustvlm.report.page import Table


def _eiil(results: Mapping) -> Table:
    table = inferred_envs_table(InvarianceResults.from_dict(dict(results)))
    if table is None:
        raise ConfigError("no EIIL method in this run: run `demo invariance --methods irm,irm_eiil,...`")
    return table


def _spread(grid: Mapping) -> Table:
    """One setting per subfolder (`figures.write.GRID_FILES`)."""
    return spread_grid_table({name: InvarianceResults.from_dict(results) for name, results in grid.items()})


#: figure name -> (the demo that writes its results.json, the table made from it)
FIGURES: dict[str, tuple[str, Callable[[Mapping], Table]]] = {
    "invariance": ("demo invariance", lambda results: error_table(InvarianceResults.from_dict(dict(results)))),
    "invariance-spread": ("demo invariance", _spread),
    "invariance-eiil": ("demo invariance", _eiil),
}
#: figure name -> draws its picture from the same results
IMAGES: dict[str, Callable[[Mapping, Path], Path | None]] = {
    "invariance": lambda results, path: bar_chart(InvarianceResults.from_dict(dict(results)), path),
}
OWN_TEST_FIGURES: tuple[str, ...] = ()
