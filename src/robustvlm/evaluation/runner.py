"""Evaluate a fine-tuned model: generate for every test record, score, summarise per environment.

Writes in `out_dir`:
  predictions.jsonl  one row per example as it is generated (id, env, ood, instruction, prediction,
                     target, per-sample scores); a re-run with resume=True skips finished ids
  metrics.json       per-environment means, the in-domain mean `id` and out-of-domain mean `ood`
                     (macro averages over environments), all on the 0-1 scale; with CEE, the
                     counts of undecided samples (ties, no readable verdict), which are left out
                     of the means rather than counted as wrong
  judge_cache/       the CEE judge's verdict cache (no API key is ever written)
"""

from __future__ import annotations

import json
from pathlib import Path

from tqdm.auto import tqdm

from robustvlm.config import EvalConfig
from robustvlm.data.collate import VLMCollator
from robustvlm.data.records import Example
from robustvlm.models.generate import generate_batch
from robustvlm.evaluation.metrics.registry import (
    METRICS,
    after_generation_metrics,
    check_metric_names,
    check_needs,
    per_batch_metrics,
)
from robustvlm.jsonl import read_appended_rows
from robustvlm.models.loading import load_vlm


def add_reference_scores(rows: list[dict], cfg: EvalConfig, out_dir: Path) -> bool:
    """Fill in the after-generation metrics named in `cfg.metrics` on the rows lacking them.

    Args:
        rows: prediction rows (id, env, ood, instruction, prediction, target, scores), changed
            in place.
        cfg: the evaluation settings (metric names, BERTScore encoder, judge).
        out_dir: the evaluation folder, where a metric may keep a cache (the judge's verdicts).

    Returns:
        True when any row changed.
    """
    check_needs(cfg.metrics, dict(cfg))
    changed = False
    for metric in after_generation_metrics(cfg.metrics):
        changed |= metric.score(rows, cfg, out_dir)
    return changed


def select_examples(
    examples: list[Example], split: str, max_per_env: int | None = None
) -> list[Example]:
    """Records of `split`, optionally the first `max_per_env` of each environment."""
    seen: dict[str, int] = {}
    picked = []
    for ex in examples:
        if ex.split != split or (max_per_env is not None and seen.get(ex.env, 0) >= max_per_env):
            continue
        seen[ex.env] = seen.get(ex.env, 0) + 1
        picked.append(ex)
    return picked


def summarize(rows: list[dict], metric_names: list[str]) -> dict:
    """Per-environment means and the in-domain / out-of-domain macro means of each metric."""
    per_env: dict[str, dict] = {}
    for row in rows:
        env = per_env.setdefault(row["env"], {"n": 0, "ood": bool(row["ood"]), "_sums": {}})
        env["n"] += 1
        for m in metric_names:
            if row["scores"].get(m) is not None:
                s = env["_sums"].setdefault(m, [0.0, 0])
                s[0] += row["scores"][m]
                s[1] += 1
    for env in per_env.values():
        for m, (total, n) in env.pop("_sums").items():
            env[m] = total / n
    groups = {}
    for name, ood in (("id", False), ("ood", True)):
        envs = [e for e in per_env.values() if e["ood"] == ood]
        groups[name] = {
            m: (
                sum(e[m] for e in envs if m in e) / sum(m in e for e in envs)
                if any(m in e for e in envs)
                else None
            )
            for m in metric_names
        }
    return {"n": len(rows), "scale": "0-1", "per_env": dict(sorted(per_env.items())), **groups}


def evaluate(
    model_dir: str | Path,
    examples: list[Example],
    out_dir: str | Path,
    *,
    cfg: EvalConfig | None = None,
    resume: bool = False,
    progress: bool = True,
) -> dict:
    """Generate, score, write predictions.jsonl + metrics.json; return metrics.

    Every per-batch metric of the registry is computed as batches are generated; the
    after-generation ones named in `cfg.metrics` then fill in the rows lacking them. Unknown
    metric names and missing settings (a judge for CEE) fail before any model is loaded.
    """
    cfg = cfg or EvalConfig()
    check_metric_names(cfg.metrics)
    check_needs(cfg.metrics, dict(cfg))
    per_batch = per_batch_metrics()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pred_path = out_dir / "predictions.jsonl"
    todo = select_examples(examples, cfg.split, cfg.max_per_env)
    done_rows = read_appended_rows(pred_path) if resume else []
    if not resume:
        pred_path.unlink(missing_ok=True)
    finished = {r["id"] for r in done_rows}
    pending = [ex for ex in todo if ex.id not in finished]

    if pending:
        model, processor = load_vlm(str(model_dir))
        model.eval()
        collator = VLMCollator(processor, {}, train=False)
        bar = tqdm(
            total=len(todo),
            initial=len(todo) - len(pending),
            disable=not progress,
            desc="eval",
            unit="ex",
        )
        with pred_path.open("a", encoding="utf-8") as f:
            for start in range(0, len(pending), cfg.batch_size):
                chunk = pending[start : start + cfg.batch_size]
                preds = generate_batch(
                    model,
                    processor,
                    collator(chunk),
                    max_new_tokens=cfg.max_new_tokens,
                    repetition_penalty=cfg.repetition_penalty,
                )
                refs = [ex.target for ex in chunk]
                scores = {m.name: m.score(preds, refs) for m in per_batch}
                for i, (ex, pred) in enumerate(zip(chunk, preds)):
                    row = {
                        "id": ex.id,
                        "env": ex.env,
                        "ood": ex.ood,
                        "instruction": ex.instruction,
                        "prediction": pred,
                        "target": ex.target,
                        "scores": {name: values[i] for name, values in scores.items()},
                    }
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    done_rows.append(row)
                f.flush()
                bar.update(len(chunk))
        bar.close()

    wanted = {ex.id for ex in todo}
    rows = [r for r in done_rows if r["id"] in wanted]
    if add_reference_scores(rows, cfg, out_dir):
        tmp = pred_path.with_suffix(".tmp")
        tmp.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done_rows), encoding="utf-8"
        )
        tmp.replace(pred_path)
    names = [m.name for m in per_batch]
    metrics = summarize(rows, names + [m for m in cfg.metrics if m not in names])
    for name in cfg.metrics:
        if METRICS[name].counts is not None:
            metrics[f"{name}_counts"] = METRICS[name].counts(rows)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2), encoding="utf-8")
    return metrics
