"""Tables of the in-context evaluation and the failure diagnosis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from robustvlm.analysis.in_context_accuracy import IclCell
from robustvlm.report.page import Table
from robustvlm.report.tables import fmt, markdown_table


def icl_markdown(cells: Sequence[IclCell]) -> str:
    """One line per (shots, policy, domain) with accuracy, gain and cost."""
    body = [
        [str(c.shots), c.policy, c.domain, str(c.n), fmt(c.accuracy), fmt(c.gain), fmt(c.cost)]
        for c in cells
    ]
    return markdown_table(
        ["shots", "policy", "domain", "n", "accuracy", "gain vs 0-shot", "cost vs random"], body
    )


def diagnosis_table(rows: Sequence[Mapping]) -> Table:
    """One line per domain of `analysis.diagnosis.diagnose_table` rows: the four accuracies, the
    in-context gain, every failing stage (pipeline order) and the verdict (the first of them)."""
    body = [
        [str(r["domain"]), str(r["n_classes"]), fmt(r["probe_acc"]), fmt(r["semantic_acc"]),
         fmt(r["zero_shot_acc"]), fmt(r.get("icl_acc")), fmt(r["icl_gain"]),
         ", ".join(r.get("gaps") or []) or "—", r["verdict"]]
        for r in rows
    ]
    return Table(["domain", "classes", "linear probe", "text-only semantics", "zero-shot", "in-context",
                  "ICL gain", "failing stages", "verdict"], body)


def diagnosis_markdown(rows: Sequence[Mapping]) -> str:
    """`diagnosis_table` as Markdown."""
    table = diagnosis_table(rows)
    return markdown_table(table.header, table.rows)
