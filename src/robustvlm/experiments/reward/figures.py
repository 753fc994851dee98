"""The reward demo's figures of the Results pages: how each table and picture is made from the
results.json of `demo reward` / `demo reward --zoo`, or from an `rm matrix` run's matrix.json and
sfc.json for its follow-ups (`rm-*`; `figures.registry` gathers them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from robustvlm.experiments.reward.report import (
    full_runs_table,
    ladder_tables,
    linear_rung_blocks,
    seeds_table,
)
from robustvlm.experiments.reward.results import RewardDemoSummary, RewardZooResults
from robustvlm.experiments.reward.zoo_report import WINDOW_FULL, WINDOW_QUICK, sfc_step_table
from robustvlm.report.page import Table
from robustvlm.report.reward_report import matrix_heatmaps
from robustvlm.report.reward_report import summary_table as matrix_summary_table
from robustvlm.reward.ladder_results import MatrixRung

Summary = RewardDemoSummary | RewardZooResults


def _demo(table: Callable[[RewardDemoSummary], Table]) -> Callable[[Mapping], Table]:
    """A table of `demo reward`'s results (read back through their class)."""
    return lambda results: table(RewardDemoSummary.from_dict(results))


def _zoo(table: Callable[[RewardZooResults], Table]) -> Callable[[Mapping], Table]:
    """A table of `demo reward --zoo`'s results (read back through their class)."""
    return lambda results: table(RewardZooResults.from_dict(results))


def _linear(summary: Summary) -> Table:
    return next(b for b in linear_rung_blocks(summary.linear) if isinstance(b, Table))


def _ladder(which: int) -> Callable[[Summary], Table]:
    """The reward ladder's table `which` (0: accuracies, 1: where the SFC weights fell)."""
    return lambda summary: ladder_tables(summary.linear, summary.frozen, summary.full)[which]


def _zoo_steps(summary: RewardZooResults) -> Table:
    return sfc_step_table(summary.steps["all"], window=WINDOW_FULL if not summary.quick else WINDOW_QUICK)


def _matrix(summary: Summary) -> Table:
    return matrix_summary_table(summary.matrix)


def _runs(summary: Summary) -> Table:
    return full_runs_table(summary.full)


#: figure name -> (the command that writes its results, the table made from them)
FIGURES: dict[str, tuple[str, Callable[[Mapping], Table]]] = {
    "reward-matrix": ("demo reward", _demo(_matrix)),
    "reward-linear": ("demo reward", _demo(_linear)),
    "reward-ladder": ("demo reward", _demo(_ladder(0))),
    "reward-ladder-sfc": ("demo reward", _demo(_ladder(1))),
    "reward-ladder-runs": ("demo reward", _demo(_runs)),
    "reward-zoo-matrix": ("demo reward --zoo", _zoo(_matrix)),
    "reward-zoo-ladder": ("demo reward --zoo", _zoo(_ladder(0))),
    "reward-zoo-ladder-sfc": ("demo reward --zoo", _zoo(_ladder(1))),
    "reward-zoo-runs": ("demo reward --zoo", _zoo(_runs)),
    "reward-zoo-steps": ("demo reward --zoo", _zoo(_zoo_steps)),
    "rm-seeds": ("rm matrix", lambda results: seeds_table(MatrixRung.from_dict(results))),
    "rm-runs": ("rm matrix", lambda results: full_runs_table(MatrixRung.from_dict(results))),
    "rm-steps": ("rm matrix", lambda results: sfc_step_table(results["steps"]["all"], window=WINDOW_FULL)),
}
#: figure name -> draws its picture from the same results
IMAGES: dict[str, Callable[[Mapping, Path], Path | None]] = {
    "reward-matrix": lambda results, path: matrix_heatmaps(RewardDemoSummary.from_dict(results).matrix, path),
    "reward-zoo-matrix": lambda results, path: matrix_heatmaps(RewardZooResults.from_dict(results).matrix, path),
}
#: figures whose quick tables the zoo reward test module checks
OWN_TEST_FIGURES = ("reward-zoo-matrix", "reward-zoo-ladder", "reward-zoo-ladder-sfc", "reward-zoo-runs",
                    "reward-zoo-steps")
