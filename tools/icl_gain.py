"""Paired in-context gains from `robustvlm icl eval` runs: per (shots, policy) and domain, k-shot
minus zero-shot accuracy on the same queries with a 95% paired bootstrap interval and the exact
McNemar p (`analysis.paired.compare_paired`), the share of answers the demonstrations changed,
and the cost of shifted demonstrations (same-domain minus cross-domain at the same k).

    python tools/icl_gain.py RUN_DIR [--domain clean]

A measurement script for docs/results/zoo-in-context.md, not a documented command.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from robustvlm.analysis.paired import compare_paired


def _rows(run: Path) -> dict[tuple[int, str], dict[str, dict]]:
    by_cell: dict[tuple[int, str], dict[str, dict]] = defaultdict(dict)
    for line in (run / "icl_predictions.jsonl").read_text().splitlines():
        row = json.loads(line)
        by_cell[(row["shots"], row["policy"])][row["id"]] = row
    return by_cell


def _line(label: str, a: dict[str, dict], b: dict[str, dict], ids: list[str]) -> str:
    c = compare_paired([float(a[i]["correct"]) for i in ids], [float(b[i]["correct"]) for i in ids])
    changed = sum(a[i]["answer"] != b[i]["answer"] for i in ids) / len(ids)
    return (f"| {label} | {c.n} | {c.mean_a:.3f} | {c.mean_b:.3f} | {c.difference:+.3f} "
            f"[{c.ci_lo:+.3f}, {c.ci_hi:+.3f}] | {c.mcnemar_p:.3f} | {changed:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--domain", default="clean")
    args = parser.parse_args()
    cells = _rows(args.run)
    zero = cells[(0, "zero-shot")]
    ids = sorted(i for i, r in zero.items() if args.domain == "all" or r["domain"] == args.domain)
    print(f"{args.run.name}, domain {args.domain}: k-shot vs zero-shot\n")
    print("| shots, policy | n | k-shot | 0-shot | gain [95% CI] | McNemar p | answers changed |")
    print("|---|---|---|---|---|---|---|")
    for (k, policy), rows in sorted(cells.items()):
        if k:
            print(_line(f"{k}, {policy}", rows, zero, ids))
    print("\ncost of shifted demonstrations: same-domain vs cross-domain, same queries\n")
    print("| shots | n | same-domain | cross-domain | same - cross [95% CI] | McNemar p | answers changed |")
    print("|---|---|---|---|---|---|---|")
    for k in sorted({k for k, _ in cells if k}):
        if (k, "same-domain") in cells and (k, "cross-domain") in cells:
            print(_line(str(k), cells[(k, "same-domain")], cells[(k, "cross-domain")], ids))


if __name__ == "__main__":
    main()
