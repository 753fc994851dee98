"""Paired in-context tables from per-query records (`icl eval`'s icl_predictions.jsonl, `icl
defined-labels`' defined_labels.jsonl): k-shot minus zero-shot accuracy on the same queries, and
the cost of shifted demonstrations (demonstrations of the query's own domain minus shifted ones,
same queries), each with a paired bootstrap 95% interval and the exact McNemar p
(`analysis.paired.compare_paired`) and the share of answers that differ; and per-cell accuracy
with a Wilson 95% interval (scipy's `binomtest`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from scipy import stats

from robustvlm.analysis.paired import compare_paired
from robustvlm.errors import DataError
from robustvlm.evaluation.in_context import ZERO_SHOT
from robustvlm.report.page import Table
from robustvlm.report.tables import markdown_table

PAIRED_HEADER = ["n", "A", "B", "A - B [95% CI]", "McNemar p", "answers changed"]


def paired_row(a: Mapping[str, Mapping], b: Mapping[str, Mapping], ids: Sequence[str], answer: str = "answer") -> list[str]:
    """Cells of `PAIRED_HEADER` for records `a` and `b` keyed by query id, over `ids`."""
    missing = [i for i in ids if i not in a or i not in b]
    if missing:
        raise DataError(f"query {missing[0]!r} is missing from one of the two compared cells")
    c = compare_paired([float(a[i]["correct"]) for i in ids], [float(b[i]["correct"]) for i in ids])
    changed = sum(a[i][answer] != b[i][answer] for i in ids) / len(ids)
    p = "—" if c.mcnemar_p is None else f"{c.mcnemar_p:.3f}"
    return [str(c.n), f"{c.mean_a:.3f}", f"{c.mean_b:.3f}",
            f"{c.difference:+.3f} [{c.ci_lo:+.3f}, {c.ci_hi:+.3f}]", p, f"{changed:.3f}"]


def wilson(correct: int, n: int) -> tuple[float, float]:
    """The Wilson score 95% interval of a proportion `correct` / `n`."""
    ci = stats.binomtest(correct, n).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


def records_by_cell(records: Sequence[Mapping]) -> dict[tuple[int, str], dict[str, Mapping]]:
    """icl eval records by (shots, policy), then by query id."""
    cells: dict[tuple[int, str], dict[str, Mapping]] = defaultdict(dict)
    for r in records:
        cells[(int(r["shots"]), str(r["policy"]))][str(r["id"])] = r
    return cells


def icl_gain_table(records: Sequence[Mapping], domain: str = "clean") -> Table:
    """k-shot (A) minus zero-shot (B) on `domain`'s queries, one row per (shots, policy)."""
    cells = records_by_cell(records)
    if (0, ZERO_SHOT) not in cells:
        raise DataError("the icl eval run has no 0-shot cell: run it with --shots 0,...")
    zero = cells[(0, ZERO_SHOT)]
    ids = sorted(i for i, r in zero.items() if r["domain"] == domain)
    if not ids:
        raise DataError(f"the icl eval run has no query of domain {domain!r}")
    rows = [[f"{k}, {policy}", *paired_row(cell, zero, ids)] for (k, policy), cell in sorted(cells.items()) if k]
    return Table(["shots, policy", *_named(PAIRED_HEADER, "k-shot", "0-shot", "gain")], rows)


def icl_shift_cost_table(records: Sequence[Mapping], domain: str = "clean") -> Table:
    """Same-domain (A) minus cross-domain (B) demonstrations on `domain`'s queries, per shots."""
    cells = records_by_cell(records)
    ids = sorted(i for i, r in next(iter(cells.values())).items() if r["domain"] == domain)
    shots = sorted(k for k, p in cells if p == "same-domain" and (k, "cross-domain") in cells)
    if not shots:
        raise DataError("the icl eval run needs both --demos same-domain and cross-domain")
    rows = [[str(k), *paired_row(cells[(k, "same-domain")], cells[(k, "cross-domain")], ids)] for k in shots]
    return Table(["shots", *_named(PAIRED_HEADER, "same-domain", "cross-domain", "same - cross")], rows)


def _named(header: Sequence[str], a: str, b: str, difference: str) -> list[str]:
    """`header` with A, B and the difference named."""
    return [{"A": a, "B": b, "A - B [95% CI]": f"{difference} [95% CI]"}.get(h, h) for h in header]


def _paired_numbers(a: Sequence[Mapping], b: Sequence[Mapping]) -> dict[str, Any]:
    """A minus B over records in the same trial order: difference, 95% interval, McNemar p."""
    c = compare_paired([float(r["correct"]) for r in a], [float(r["correct"]) for r in b])
    return {"difference": c.difference, "ci": [c.ci_lo, c.ci_hi], "mcnemar_p": c.mcnemar_p}


def defined_labels_summary(records: Sequence[Mapping], query_domain: str, ways: int) -> dict[str, Any]:
    """`icl defined-labels` per cell (demonstration domain, or "none"): accuracy with its Wilson
    interval, the gain over no demonstrations and the cost of the cell's demonstrations against
    demonstrations of `query_domain` (both paired over the same trials)."""
    by_cell: dict[str, list[Mapping]] = defaultdict(list)
    for r in sorted(records, key=lambda r: int(r["trial"])):
        by_cell[str(r["demos"])].append(r)
    if "none" not in by_cell or query_domain not in by_cell:
        raise DataError(f"defined-label records need the cells 'none' and {query_domain!r}")
    cells = []
    for cell, rows in by_cell.items():
        correct = sum(bool(r["correct"]) for r in rows)
        cells.append({"demos": cell, "n": len(rows), "correct": correct, "accuracy": correct / len(rows),
                      "ci": list(wilson(correct, len(rows))),
                      "gain": None if cell == "none" else _paired_numbers(rows, by_cell["none"]),
                      "cost": None if cell in ("none", query_domain) else _paired_numbers(by_cell[query_domain], rows)})
    return {"chance": 1 / ways, "cells": cells}


def defined_labels_table(summary: Mapping[str, Any]) -> Table:
    """One row per cell of `defined_labels_summary`: accuracy [Wilson 95%], gain over no
    demonstrations and cost against the query domain's demonstrations [paired bootstrap 95%]."""
    query = summary["config"]["query_domain"]

    def paired(p: Mapping | None) -> str:
        return "—" if p is None else f"{p['difference']:+.3f} [{p['ci'][0]:+.3f}, {p['ci'][1]:+.3f}]"

    rows = [[c["demos"], str(c["n"]), f"{c['accuracy']:.3f} [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]",
             f"{summary['chance']:.3f}", paired(c["gain"]), paired(c["cost"])] for c in summary["cells"]]
    return Table(["demonstrations", "trials", "accuracy [95% CI]", "chance", "gain over none [95% CI]",
                  f"cost vs {query} demonstrations [95% CI]"], rows)


def defined_labels_markdown(summary: Mapping[str, Any]) -> str:
    """defined_labels.md: the settings and `defined_labels_table`."""
    cfg = summary["config"]
    table = defined_labels_table(summary)
    return (f"# Defined-label in-context accuracy\n\nmodel: `{cfg['model']}`, queries: {cfg['query_domain']}, "
            f"{cfg['ways']} ways, {cfg['shots']} demonstration(s) per class, {cfg['trials']} trials\n\n"
            f"{markdown_table(table.header, table.rows)}\n")


def icl_domains_table(rows: Sequence[Mapping]) -> Table:
    """Accuracy per (shots, policy) and domain from icl_results.json's rows (domains in order, "all"
    last)."""
    domains = sorted({str(r["domain"]) for r in rows} - {"all"}) + ["all"]
    cells = {(int(r["shots"]), str(r["policy"]), str(r["domain"])): float(r["accuracy"]) for r in rows}
    settings = sorted({(k, p) for k, p, _ in cells})
    body = [[f"{k}, {p}", *(f"{cells[(k, p, d)]:.2f}" if (k, p, d) in cells else "—" for d in domains)]
            for k, p in settings]
    return Table(["shots, policy", *domains], body)
