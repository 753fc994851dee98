"""The zoo study's figures of the Results pages: Table 1 and its per-environment table from
`demo tasks --zoo`'s results.json (`figures.registry` gathers them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from robustvlm.analysis.study import StudyResults
from robustvlm.report.page import Table
from robustvlm.report.study_report import heatmap, id_ood_bars, per_env_table, table1


def _table1(results: Mapping) -> Table:
    """Table 1, the untouched model's row first where it was evaluated."""
    study = StudyResults.from_dict(results)
    return table1(study.scores, study.zero_shot)


#: figure name -> (the demo that writes its results.json, the table made from it)
FIGURES: dict[str, tuple[str, Callable[[Mapping], Table]]] = {
    "zoo-tasks": ("demo tasks --zoo", _table1),
    "zoo-tasks-envs": ("demo tasks --zoo", lambda results: per_env_table(StudyResults.from_dict(results), "exact")),
}
#: figure name -> draws its picture from the same results
IMAGES: dict[str, Callable[[Mapping, Path], Path | None]] = {
    "zoo-tasks": lambda results, path: id_ood_bars(StudyResults.from_dict(results), "exact", path),
    "zoo-tasks-envs": lambda results, path: heatmap(StudyResults.from_dict(results), "exact", path),
}
#: figures whose quick tables the zoo study's test module checks
OWN_TEST_FIGURES = ("zoo-tasks", "zoo-tasks-envs")
