"""Tables of `robustness fit --group-by` runs (their groups.json), one run per shift: the overall
line of each shift, and each group's effective robustness per shift with its interval."""

from __future__ import annotations

from collections.abc import Mapping

from robustvlm.report.page import Table


def _points(estimate: Mapping | None) -> str:
    if estimate is None:
        return "baseline"
    lo, hi = estimate["ci"]
    return f"{100 * estimate['value']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def group_fits_table(runs: Mapping[str, Mapping]) -> Table:
    """One row per run (a shift): models, the line on all of them (slope, intercept, r²) and the
    groups whose own line is steeper than 1 (of those that have one)."""
    rows = []
    for content in runs.values():
        overall, groups = content["overall"], content["groups"]
        lines = [g for g in groups if g["line"] is not None]
        steep = sum(g["line"]["slope"] > 1 for g in lines)
        rows.append([f"{content['shift']} vs {content['ref']}", str(overall["n"]), f"{overall['slope']:.2f}",
                     f"{overall['intercept']:.2f}", f"{overall['r2']:.2f}", f"{steep} of {len(lines)}"])
    return Table(["shift", "models", "slope", "intercept", "r²", "groups with slope > 1"], rows)


def group_er_table(runs: Mapping[str, Mapping]) -> Table:
    """One row per group, one column per run (a shift): its models and its effective robustness
    in points with the 95% interval over models and questions (over models alone when the
    question counts are unknown)."""
    contents = list(runs.values())
    order = list(dict.fromkeys(g["group"] for c in contents for g in c["groups"]))
    rows = []
    for group in order:
        cells = []
        for content in contents:
            entry = next((g for g in content["groups"] if g["group"] == group), None)
            cells.append("—" if entry is None else _points(entry["er_questions"] or entry["er_models"]))
        models = next(g["models"] for c in contents for g in c["groups"] if g["group"] == group)
        rows.append([group, str(models), *cells])
    return Table(["group", "models", *(c["shift"] for c in contents)], rows)
