"""The figures of the Results pages made from measurement commands' output files, not from a demo:
in-context runs, diagnoses, zoo members' cards and the published OpenCLIP lines (how each table
and picture is made; `figures.registry` gathers them with the experiments' own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from robustvlm.report.group_tables import group_er_table, group_fits_table
from robustvlm.report.icl_curves import defined_labels_bars, icl_curves
from robustvlm.report.icl_gain import (
    defined_labels_table,
    icl_domains_table,
    icl_gain_table,
    icl_shift_cost_table,
)
from robustvlm.report.icl_policy import icl_policy_cost_table
from robustvlm.report.icl_served import icl_served_table
from robustvlm.report.in_context_tables import diagnosis_table
from robustvlm.report.page import Table
from robustvlm.report.zoo_card import (
    curriculum_curve_table,
    curriculum_stages_table,
    zoo_card_table,
)

#: figure name -> (the command that writes its results, the table made from them)
FIGURES: dict[str, tuple[str, Callable[[Mapping], Table]]] = {
    "icl-domains": ("icl eval", lambda results: icl_domains_table(results["rows"])),
    "icl-gain": ("icl eval", lambda results: icl_gain_table(results["records"])),
    "icl-shift-cost": ("icl eval", lambda results: icl_shift_cost_table(results["records"])),
    "icl-defined-labels": ("icl defined-labels", defined_labels_table),
    "icl-policy-cost": ("icl eval", lambda results: icl_policy_cost_table(results["records"])),
    "icl-served": ("icl eval", icl_served_table),
    "diagnose": ("diagnose", lambda results: diagnosis_table(results["rows"])),
    "zoo-card": ("zoo build", zoo_card_table),
    "curriculum-stages": ("zoo build", curriculum_stages_table),
    "curriculum-curve": ("zoo build", curriculum_curve_table),
    "openclip-lines": ("robustness fit --group-by", group_fits_table),
    "openclip-er": ("robustness fit --group-by", group_er_table),
}
#: figure name -> draws its picture from the same results
IMAGES: dict[str, Callable[[Mapping, Path], Path | None]] = {
    "icl-domains": lambda results, path: icl_curves(results["rows"], path, title=f"{results['config']['model']}: "
                                                    "accuracy against demonstrations, per domain"),
    "icl-defined-labels": lambda results, path: defined_labels_bars(results, path),
}
#: figures whose quick tables the published-lines test module checks
OWN_TEST_FIGURES = ("openclip-lines", "openclip-er")
