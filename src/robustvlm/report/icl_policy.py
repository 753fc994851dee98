"""The cost of each demonstration policy under each shift, from `icl eval`'s per-query records
(icl_predictions.jsonl), in the shape of the OOD-generalization paper's in-context tables: one
row per (query domain, shots), the 0-shot and `random`-demonstration accuracy, the gain of random
demonstrations over none, and for every other policy its cost against random demonstrations
(random minus policy on the same queries: positive when the policy hurts, the sign of
`analysis.in_context_accuracy.IclCell.cost`), each difference with its paired bootstrap 95%
interval (`analysis.paired.compare_paired`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from robustvlm.analysis.paired import compare_paired
from robustvlm.errors import DataError
from robustvlm.evaluation.in_context import POLICIES, ZERO_SHOT
from robustvlm.report.page import Table

BASELINE = "random"  # the policy the others' cost is measured against


def _by_cell(records: Sequence[Mapping]) -> dict[tuple[int, str, str], dict[str, bool]]:
    """(shots, policy, domain) -> query id -> correct."""
    cells: dict[tuple[int, str, str], dict[str, bool]] = defaultdict(dict)
    for r in records:
        cells[(int(r["shots"]), str(r["policy"]), str(r["domain"]))][str(r["id"])] = bool(r["correct"])
    return cells


def paired_cell(a: Mapping[str, bool], b: Mapping[str, bool]) -> str:
    """"A - B [lo, hi]": mean of A minus mean of B over the same query ids (in sorted order),
    paired bootstrap 95%."""
    ids = sorted(a)
    if sorted(b) != ids:
        raise DataError("the two compared cells hold different queries")
    c = compare_paired([float(a[i]) for i in ids], [float(b[i]) for i in ids])
    return f"{c.difference:+.3f} [{c.ci_lo:+.3f}, {c.ci_hi:+.3f}]"


def _accuracy(cell: Mapping[str, bool]) -> str:
    return f"{sum(cell.values()) / len(cell):.3f}"


def icl_policy_cost_table(records: Sequence[Mapping]) -> Table:
    """One row per (query domain, shots > 0): n, 0-shot and random accuracy, random minus 0-shot,
    and random minus each other policy run, each [paired bootstrap 95%]."""
    cells = _by_cell(records)
    domains = sorted({d for _, p, d in cells if p == ZERO_SHOT})
    shots = sorted({k for k, p, _ in cells if p == BASELINE})
    if not domains or not shots:
        raise DataError(f"the icl eval run needs --shots 0,... and --demos {BASELINE},...")
    others = [p for p in POLICIES if p != BASELINE and any(q == p for _, q, _ in cells)]
    rows = []
    for domain in domains:
        zero = cells[(0, ZERO_SHOT, domain)]
        for k in shots:
            base = cells[(k, BASELINE, domain)]
            costs = [paired_cell(base, cells[(k, p, domain)]) if (k, p, domain) in cells else "—" for p in others]
            rows.append([domain, str(k), str(len(zero)), _accuracy(zero), _accuracy(base),
                         paired_cell(base, zero), *costs])
    return Table(["query domain", "shots", "n", "0-shot", BASELINE, f"{BASELINE} - 0-shot [95% CI]",
                  *(f"cost of {p} [95% CI]" for p in others)], rows)
