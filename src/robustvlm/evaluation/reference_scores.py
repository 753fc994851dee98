"""Scores computed after generation from (question, reference, prediction): BERTScore and CEE.

They fill in whatever rows lack them, so a resumed evaluation scores only new rows (BERTScore
with idf is the exception: idf comes from all references, so every row is rescored). CEE
verdicts are also cached on disk by the judge, so re-asking costs no requests.
"""

from __future__ import annotations

from pathlib import Path

from robustvlm.config import EvalConfig
from robustvlm.errors import ConfigError


def add_bertscore(rows: list[dict], cfg: EvalConfig) -> bool:
    """Set scores["bertscore"] (F1, 0-1) on rows lacking it; True when any row changed."""
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


def add_cee(rows: list[dict], cfg: EvalConfig, cache_dir: Path) -> bool:
    """Set scores["cee"] (1, 0, or None for a tie / no readable verdict) and row["cee_votes"]."""
    if cfg.judge is None:
        raise ConfigError(
            "eval.metrics includes 'cee' but eval.judge (the judge endpoint) is not set"
        )
    todo = [r for r in rows if "cee" not in r["scores"]]
    if not todo:
        return False
    from robustvlm.evaluation.metrics.judge import CEEJudge

    result = CEEJudge(cfg.judge, cache_dir).score(
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


def add_reference_scores(rows: list[dict], cfg: EvalConfig, cache_dir: Path) -> bool:
    """Add every configured post-generation metric; True when any row changed."""
    changed = False
    if "bertscore" in cfg.metrics:
        changed |= add_bertscore(rows, cfg)
    if "cee" in cfg.metrics:
        changed |= add_cee(rows, cfg, cache_dir)
    return changed
