"""The ladder's figures of the Results pages: how each table and picture is made from the
results.json of `demo ladder` / `demo ladder --zoo` (`figures.registry` gathers them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from robustvlm.experiments.ladder.paired_report import paired_table
from robustvlm.experiments.ladder.readings import is_vlm_cell
from robustvlm.experiments.ladder.report import (
    label,
    ladder_plot,
    ladder_seeds_table,
    summary_table,
    zero_shot_table,
)
from robustvlm.experiments.ladder.results import LadderResults
from robustvlm.report.page import Table


def _cells(vlm: bool, reading: str = "final") -> Callable[[Mapping], Table]:
    """The table of the VLM rungs (`vlm`) or of the others, under `reading`."""
    def table(results: Mapping) -> Table:
        summary = LadderResults.from_dict(results).summary
        return summary_table({cell: v for cell, v in summary.items() if is_vlm_cell(cell) == vlm}, reading)
    return table


def _seeds(results: Mapping) -> Table:
    summary = LadderResults.from_dict(results).summary
    return ladder_seeds_table({cell: v for cell, v in summary.items() if is_vlm_cell(cell)})


def _bars(results: Mapping, path: Path) -> Path:
    """The bars over all the rungs, as the ladder's report draws them."""
    return ladder_plot(LadderResults.from_dict(results).summary, path)


#: figure name -> (the demo that writes its results.json, the table made from it)
FIGURES: dict[str, tuple[str, Callable[[Mapping], Table]]] = {
    "ladder": ("demo ladder", _cells(vlm=False)),
    "ladder-vlm": ("demo ladder", _cells(vlm=True)),
    "ladder-zoo": ("demo ladder --zoo", _cells(vlm=True)),
    "ladder-zoo-oracle": ("demo ladder --zoo", _cells(vlm=True, reading="oracle")),
    "ladder-zoo-td": ("demo ladder --zoo", _cells(vlm=True, reading="training-domain")),
    "ladder-zoo-shot": ("demo ladder --zoo", lambda results: zero_shot_table(LadderResults.from_dict(results))),
    "ladder-zoo-seeds": ("demo ladder --zoo", _seeds),
    "ladder-zoo-paired": ("demo ladder --zoo", lambda results: paired_table(
        LadderResults.from_dict(results).paired, label)),
}
#: figure name -> draws its picture from the same results
IMAGES: dict[str, Callable[[Mapping, Path], Path | None]] = {"ladder": _bars, "ladder-zoo": _bars}
#: figures whose quick tables the zoo ladder's test module checks (`figures.registry.OWN_TEST_FIGURES`)
OWN_TEST_FIGURES = ("ladder-zoo", "ladder-zoo-oracle", "ladder-zoo-td", "ladder-zoo-shot", "ladder-zoo-seeds",
                    "ladder-zoo-paired")
