"""The same `icl eval` run on one model through two backends, local and served, compared query by
query: per (shots, policy), the accuracy each backend reads, the share of queries on which the two
gave the identical answer, and each backend's in-context gain over its own 0-shot cell on the same
queries with its paired bootstrap 95% interval (`analysis.paired.compare_paired`). Two runs of
the same model under the same greedy decoding should agree answer for answer.

Input: {"local": records, "served": records}, each `icl eval`'s icl_predictions.jsonl rows
(`id`, `shots`, `policy`, `answer`, `correct`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from robustvlm.analysis.paired import compare_paired
from robustvlm.errors import DataError
from robustvlm.evaluation.in_context import ZERO_SHOT
from robustvlm.report.icl_gain import records_by_cell
from robustvlm.report.page import Table

BACKENDS = ("local", "served")


def _gain(cell: Mapping[str, Mapping], zero: Mapping[str, Mapping], ids: Sequence[str]) -> str:
    c = compare_paired([float(cell[i]["correct"]) for i in ids], [float(zero[i]["correct"]) for i in ids])
    return f"{c.difference:+.3f} [{c.ci_lo:+.3f}, {c.ci_hi:+.3f}]"


def icl_served_table(runs: Mapping[str, Sequence[Mapping]]) -> Table:
    """One row per (shots, policy) of the two runs in `runs` (`BACKENDS`; module doc). DataError
    when a run is missing or the two hold different cells or queries."""
    missing = [b for b in BACKENDS if not runs.get(b)]
    if missing:
        raise DataError(f"the served comparison needs an icl eval run per backend; none for {', '.join(missing)}")
    local, served = (records_by_cell(runs[b]) for b in BACKENDS)
    if local.keys() != served.keys() or any(local[c].keys() != served[c].keys() for c in local):
        raise DataError("the local and served icl eval runs hold different cells or queries: run both with the "
                        "same --data, --shots, --demos, --n-per-env and --seed")
    if (0, ZERO_SHOT) not in local:
        raise DataError("the icl eval runs have no 0-shot cell: run them with --shots 0,...")
    rows = []
    for key in sorted(local):
        ids = sorted(local[key])
        same = sum(local[key][i]["answer"] == served[key][i]["answer"] for i in ids)
        accuracy = [sum(bool(cells[key][i]["correct"]) for i in ids) / len(ids) for cells in (local, served)]
        gains = ["—" if key[0] == 0 else _gain(cells[key], cells[(0, ZERO_SHOT)], ids) for cells in (local, served)]
        rows.append([f"{key[0]}, {key[1]}", str(len(ids)), f"{accuracy[0]:.3f}", f"{accuracy[1]:.3f}",
                     f"{same}/{len(ids)}", *gains])
    return Table(["shots, policy", "n", "local accuracy", "served accuracy", "identical answers",
                  "local gain over 0-shot [95% CI]", "served gain over 0-shot [95% CI]"], rows)
