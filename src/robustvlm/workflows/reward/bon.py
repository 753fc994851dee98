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
import math
from collections.abc import Mapping
from pathlib import Path

from robustvlm.analysis.reward import best_of_n_curve
from robustvlm.errors import DataError
from robustvlm.report.reward_report import bon_curves
from robustvlm.runs import claim_run_folder, read_input_jsonl

RESULTS_FILE = "bon.json"


def n_grid(k: int) -> list[int]:
    """1, 2, 4, ... up to K, and K itself."""
    ns, n = [], 1
    while n < k:
        ns.append(n)
        n *= 2
    return [*ns, k]


def bon_results(scores: Mapping[str, str | Path]) -> dict[str, dict]:
    """{label: {"curve", "left_out", "k"}} from each label's scores.jsonl (read-only; every file
    checked first: same prompts, same K, finite rewards)."""
    checked = {label: _read_scores(path) for label, path in scores.items()}
    _same_prompts(checked, scores)
    results = {}
    for label, rows in checked.items():
        usable = [r for r in rows if all(g is not None for g in r["gold"])]
        if not usable:
            raise DataError("no prompt with a gold score for every candidate", str(scores[label]))
        k = len(usable[0]["rewards"])
        results[label] = {
            "k": k,
            "curve": best_of_n_curve([r["rewards"] for r in usable], [r["gold"] for r in usable], n_grid(k)),
            "left_out": len(rows) - len(usable),
        }
    return results


def _read_scores(path: str | Path) -> list[dict]:
    """The rows of one `rm score` file, each checked: id, K finite rewards, K gold scores (a gold
    score may be None: no readable verdict); every row with the first row's K."""
    rows: list[dict] = []
    for line, row in read_input_jsonl(path, "scores file (written by `robustvlm rm score`)"):
        missing = [key for key in ("id", "rewards", "gold") if key not in row]
        if missing:
            raise DataError(f"row has no {missing[0]!r} field (rows of `rm score` have id, rewards, "
                            "gold)", str(path), line)
        rewards, gold = row["rewards"], row["gold"]
        if not isinstance(rewards, list) or not rewards or not all(_finite(r) for r in rewards):
            raise DataError(f"prompt {row['id']!r}: rewards must be a non-empty list of finite numbers",
                            str(path), line)
        if not isinstance(gold, list) or len(gold) != len(rewards):
            raise DataError(f"prompt {row['id']!r}: {len(rewards)} rewards but gold is not a list of "
                            f"{len(rewards)} scores", str(path), line)
        if any(g is not None and not _finite(g) for g in gold):
            raise DataError(f"prompt {row['id']!r}: gold scores must be finite numbers (or null)",
                            str(path), line)
        if rows and len(rewards) != len(rows[0]["rewards"]):
            raise DataError(f"prompt {row['id']!r} has {len(rewards)} candidates, the first prompt "
                            f"{len(rows[0]['rewards'])}: sample every prompt with the same K", str(path), line)
        rows.append(row)
    if not rows:
        raise DataError("no rows", str(path))
    return rows


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _same_prompts(checked: Mapping[str, list[dict]], scores: Mapping[str, str | Path]) -> None:
    """Every file must score the same prompts with the same K (their curves are compared)."""
    first = next(iter(checked))
    ids, k = {r["id"] for r in checked[first]}, len(checked[first][0]["rewards"])
    for label, rows in checked.items():
        other = {r["id"] for r in rows}
        if other != ids:
            raise DataError(
                f"scores different prompts from {scores[first]} ({len(other - ids)} prompts only here, "
                f"{len(ids - other)} only there): score the same candidates with every model",
                str(scores[label]),
            )
        if len(rows[0]["rewards"]) != k:
            raise DataError(f"K = {len(rows[0]['rewards'])} candidates, {scores[first]} has K = {k}",
                            str(scores[label]))


def run_bon(
    scores: Mapping[str, str | Path], out_dir: str | Path, *, gold: str, resume: bool = False
) -> dict[str, dict]:
    """Write bon.json and bon.png for `scores` ({label: scores.jsonl}); `gold` names the gold
    score on the plot's axis. With `resume`, a folder of the same settings is recomputed."""
    results = bon_results(scores)  # inputs checked before the folder is claimed
    settings = {"scores": {k: str(Path(v).resolve()) for k, v in scores.items()}, "gold": gold}
    out = claim_run_folder(out_dir, settings, command="rm bon", resume=resume)
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    bon_curves({label: r["curve"] for label, r in results.items()}, out / "bon.png", gold=gold)
    return results
