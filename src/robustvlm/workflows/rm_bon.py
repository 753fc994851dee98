"""`robustvlm rm bon`: Best-of-N curves of one or more reward models from their `rm score` rows.

For N = 1, 2, 4, ..., K (and K), the expected gold score of the candidate a reward model picks
from N candidates drawn at random from the K sampled ones, averaged over prompts
(`analysis.reward.best_of_n`: exact, unbiased; reward ties go to the candidate sampled first).
Prompts whose candidates lack a gold score (no readable judge verdict) are left out and counted.

Output in OUT: bon.json ({label: {"curve": [{n, mean, n_prompts}], "left_out": count}}) and
bon.png.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from robustvlm.analysis.reward import best_of_n_curve
from robustvlm.errors import DataError
from robustvlm.report.reward_report import bon_curves
from robustvlm.runs import claim_run_folder, read_jsonl

RESULTS_FILE = "bon.json"


def n_grid(k: int) -> list[int]:
    """1, 2, 4, ... up to K, and K itself."""
    ns, n = [], 1
    while n < k:
        ns.append(n)
        n *= 2
    return [*ns, k]


def bon_results(scores: Mapping[str, str | Path]) -> dict[str, dict]:
    """{label: {"curve", "left_out", "k"}} from each label's scores.jsonl."""
    results = {}
    for label, path in scores.items():
        rows = read_jsonl(path)
        usable = [r for r in rows if all(g is not None for g in r["gold"])]
        if not usable:
            raise DataError(f"{path}: no prompt with a gold score for every candidate")
        k = len(usable[0]["rewards"])
        for row in usable:
            if len(row["rewards"]) != k or len(row["gold"]) != k:
                raise DataError(f"prompt has {len(row['rewards'])} candidates, the first one {k}: "
                                "sample every prompt with the same K", str(path), row["id"])
        results[label] = {
            "k": k,
            "curve": best_of_n_curve([r["rewards"] for r in usable], [r["gold"] for r in usable], n_grid(k)),
            "left_out": len(rows) - len(usable),
        }
    return results


def run_bon(
    scores: Mapping[str, str | Path], out_dir: str | Path, *, gold: str, resume: bool = False
) -> dict[str, dict]:
    """Write bon.json and bon.png for `scores` ({label: scores.jsonl}); `gold` names the gold
    score on the plot's axis. With `resume`, a folder of the same settings is recomputed."""
    out = Path(out_dir)
    claim_run_folder(out, {"scores": {k: str(v) for k, v in scores.items()}, "gold": gold}, resume=resume)
    results = bon_results(scores)
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    bon_curves({label: r["curve"] for label, r in results.items()}, out / "bon.png", gold=gold)
    return results
