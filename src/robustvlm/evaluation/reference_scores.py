"""The metrics registry's after-generation scorers: BERTScore and CEE, from the rows of
predictions.jsonl (question, reference, prediction).

Each takes (rows, the EvalConfig, the evaluation folder) and fills in the rows that lack its
score, so a resumed evaluation scores only new rows (BERTScore with idf is the exception: idf
comes from all references, so every row is rescored). CEE verdicts are also cached on disk by
the judge, in OUT/judge_cache/, so re-asking costs no requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robustvlm.config import EvalConfig

JUDGE_CACHE = "judge_cache"


def add_bertscore(rows: list[dict], cfg: EvalConfig, out_dir: Path) -> bool:
    """Set scores["bertscore"] (F1, 0-1) on rows lacking it; True when any row changed.

    `out_dir` is not used: BERTScore keeps no cache.
    """
    todo = rows if cfg.bertscore.idf else [r for r in rows if "bertscore" not in r["scores"]]
    if not todo:
        return False
    from robustvlm.evaluation.metrics.bertscore import BERTScorer

    scorer = BERTScorer(
        cfg.bertscore.model,
        layer=cfg.bertscore.layer,
        idf=cfg.bertscore.idf,
        batch_size=cfg.bertscore.batch_size,
    )
    f1 = scorer.score([r["prediction"] for r in todo], [r["target"] for r in todo])["f1"]
    for row, value in zip(todo, f1):
        row["scores"]["bertscore"] = float(value)
    return True


def add_cee(rows: list[dict], cfg: EvalConfig, out_dir: Path) -> bool:
    """Set scores["cee"] (1, 0, or None for a tie / no readable verdict) and row["cee_votes"]
    on rows lacking it, asking the judge `cfg.judge` (must be set); True when any row changed."""
    todo = [r for r in rows if "cee" not in r["scores"]]
    if not todo:
        return False
    from robustvlm.evaluation.metrics.judge import CEEJudge

    assert cfg.judge is not None  # the cee metric needs eval.judge (checked before scoring)
    result = CEEJudge(cfg.judge, out_dir / JUDGE_CACHE).score(
        [r["instruction"] for r in todo],
        [r["target"] for r in todo],
        [r["prediction"] for r in todo],
    )
    for row, sample in zip(todo, result.samples):
        row["scores"]["cee"] = sample["score"]
        row["cee_votes"] = {
            "votes": sample["votes"],
            "unparsed": sample["unparsed"],
            "tie": sample["tie"],
        }
    return True


def cee_counts(rows: list[dict]) -> dict:
    """How many samples the judges could not decide, and how many verdicts were unreadable."""
    details = [r["cee_votes"] for r in rows if "cee_votes" in r]
    return {
        "n_judged": len(details),
        "n_ties": sum(d["tie"] for d in details),
        "n_no_verdict": sum(
            r["scores"].get("cee") is None and not r["cee_votes"]["tie"]
            for r in rows
            if "cee_votes" in r
        ),
        "n_unparsed_verdicts": sum(d["unparsed"] for d in details),
    }
