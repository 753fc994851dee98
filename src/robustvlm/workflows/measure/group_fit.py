"""`robustness fit --group-by COLUMN` and `--baseline-table FILE`: after the fit, a line per group
with each group's effective robustness against the baseline (groups.json, groups.png), and a
user's own models placed against the fitted (published) line (placed.json).

The statistics live in `analysis.group_lines`; the plot in `report.line_scatter`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from robustvlm.analysis.accuracy_on_the_line import ModelPoint, RobustnessFit, Transform
from robustvlm.analysis.effective_robustness import ErEstimate
from robustvlm.analysis.group_lines import GroupLine, group_lines, place_against
from robustvlm.data.results import ReadOptions, skips_json
from robustvlm.machine import MACHINE_KEY, machine_record
from robustvlm.report.line_scatter import family_lines_scatter
from robustvlm.workflows.measure.robustness_fit import load_points

UNITS = "effective robustness in fractions (x 100 = percentage points); intervals are bootstrap percentiles"


def write_group_lines(result: RobustnessFit, out: Path, *, group_by: str, n_boot: int = 2000,
                      seed: int = 0) -> list[GroupLine]:
    """Every group's line and ER against `result.baseline` (None: each against the others);
    writes groups.json and groups.png into `out`."""
    kind: Transform = result.fit.transform
    groups = group_lines([m.point for m in result.models], baseline=result.baseline, kind=kind, n_boot=n_boot,
                         seed=seed)
    content = {"ref": result.ref, "shift": result.shift, "group_by": group_by, "transform": kind,
               "baseline": result.baseline or "the other groups", "units": UNITS,
               "overall": result.fit.to_dict(), "groups": [g.to_dict() for g in groups], MACHINE_KEY: machine_record()}
    (out / "groups.json").write_text(json.dumps(content, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    family_lines_scatter(result.models, {g.group: g.line for g in groups if g.line is not None}, out / "groups.png",
                         title=f"{result.shift} vs {result.ref}: a line per {group_by}",
                         xlabel=f"{result.ref} accuracy", ylabel=f"{result.shift} accuracy")
    return groups


@dataclass(frozen=True)
class PlacedModel:
    """A user's model against the published line: its point and its ER with the interval over
    the line's models and its own questions."""

    point: ModelPoint
    er: ErEstimate


def place_baseline_table(result: RobustnessFit, table: str | Path, out: Path, *, fmt: str = "auto",
                         n_questions: Mapping[str, int] | None = None, n_boot: int = 2000,
                         seed: int = 0, options: ReadOptions | None = None) -> list[PlacedModel]:
    """Each model of the user's results `table` (its `result.ref` and `result.shift` accuracies)
    against the line of `result`; writes placed.json into `out`."""
    base = [m.point for m in result.models if m.in_fit]
    mine, skipped = load_points(table, ref=result.ref, shift=result.shift, fmt=fmt, n_questions=n_questions,
                                options=options)
    placed = [PlacedModel(p, place_against(base, [p], kind=result.fit.transform, n_boot=n_boot, seed=seed,
                                           counts=True))
              for p in mine]
    content = {"ref": result.ref, "shift": result.shift, "line": result.fit.to_dict(), "units": UNITS,
               "line_models": len(base), "table": str(table),
               "models": [{"model": m.point.model, "acc_ref": m.point.acc_ref, "acc_shift": m.point.acc_shift,
                           "n_ref": m.point.n_ref, "n_shift": m.point.n_shift, "effective_robustness": m.er.value,
                           "ci": list(m.er.ci), "share_above": m.er.share_above} for m in placed],
               "skipped": skips_json(skipped)}
    (out / "placed.json").write_text(json.dumps(content, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return placed
