"""`robustvlm eval`: generate for every evaluation record, score, summarise per environment.

Writes in `out_dir`:
  config.resolved.yaml  the model, the evaluated records (count and a hash of their ids) and the
                        eval settings; `--resume` needs them to match (batch size and the list
                        of metrics may change: new metrics are filled in on the finished rows)
  predictions.jsonl     one row per example as it is generated (id, env, ood, instruction,
                        prediction, target, per-sample scores); a resumed run skips finished ids
  metrics.json          per-environment means, the in-domain mean `id` and out-of-domain mean
                        `ood` (macro averages over environments), all on the 0-1 scale; with
                        CEE, the counts of undecided samples (ties, no readable verdict), which
                        are left out of the means rather than counted as wrong
  judge_cache/          the CEE judge's verdict cache (no API key is ever written)
  usage.json            a served model's requests sent, cache hits and tokens (`models.served`)
  blind/                with `--blind`: the same files from the model asked with the image removed
                        (`models.blind`: a text-only prompt)
  vision_gain.csv/.json/.md/.html
                        with `--blind`: with-image minus blind score per metric and environment,
                        with a paired bootstrap interval (`report.vision_gain`)
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from robustvlm.analysis.summary import EvalMetrics, summarize
from robustvlm.analysis.vision_gain import vision_gain
from robustvlm.config import EvalConfig, ServedConfig, load_judge_config, validate_config
from robustvlm.data.loaders import load_examples
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation.generation import generation_rows, select_examples
from robustvlm.evaluation.metrics.registry import (
    METRICS,
    add_after_generation_scores,
    check_metric_names,
    check_needs,
    per_batch_metrics,
)
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import (
    SERVER_MAY_DIFFER,
    generative_family,
    load_backend,
    served_settings,
)
from robustvlm.models.blind import BlindBackend, blind_input
from robustvlm.models.support import require_capability
from robustvlm.report.vision_gain import GainSection, write_vision_gain
from robustvlm.runs import read_jsonl, usage_recorder, write_jsonl
from robustvlm.sharding import claim, helpers_stop_here, score_rows, share

PREDICTIONS_FILE = "predictions.jsonl"
BLIND_FOLDER = "blind"  # the blind run's own folder inside the run's (`--blind`)
METRICS_FILE = "metrics.json"


def records_digest(examples: Sequence[Example]) -> str:
    """sha256 of the records' ids in order: which records an evaluation covers."""
    return hashlib.sha256("\n".join(ex.id for ex in examples).encode("utf-8")).hexdigest()


def evaluate(
    model: ModelRef,
    examples: list[Example],
    out_dir: str | Path,
    *,
    cfg: EvalConfig | None = None,
    resume: bool = False,
    progress: bool = True,
    served: ServedConfig | None = None,
    blind: bool = False,
) -> EvalMetrics:
    """Generate, score, write predictions.jsonl + metrics.json (see the module doc).

    Every per-batch metric of the registry is computed as batches are generated; the
    after-generation ones named in `cfg.metrics` then fill in the rows lacking them. Unknown
    metric names and missing settings (a judge for CEE) fail before any model is loaded.
    `served`: the server of an "openai:MODEL" model; `blind`: ask it with the image removed (`models.blind`).
    Under a launcher every process generates a share (`sharding`); the main one summarises.
    """
    cfg = cfg or EvalConfig()
    out, todo = _generate(model, examples, out_dir, cfg=cfg, resume=resume, progress=progress, served=served,
                          blind=blind)
    helpers_stop_here()
    return _summarise(out, todo, cfg)


def _generate(
    model: ModelRef, examples: list[Example], out_dir: str | Path, *, cfg: EvalConfig, resume: bool,
    progress: bool, served: ServedConfig | None, blind: bool,
) -> tuple[Path, list[Example]]:
    """Claim `out_dir` and generate the rows of predictions.jsonl still missing: (the run folder,
    the examples of this run folder: all, or its `--shard` block)."""
    check_metric_names(cfg.metrics)
    check_needs(cfg.metrics, dict(cfg))
    require_capability(model, "eval")
    todo = select_examples(examples, cfg.split, cfg.max_per_env)
    settings = {
        "model": model.name,
        "records": {"n": len(todo), "ids_sha256": records_digest(todo)},
        "eval": cfg.model_dump(mode="json"),
        **served_settings(model, served), **({"blind": True} if blind else {}),
    }
    out_dir = claim(
        out_dir, settings, command="eval", resume=resume, may_differ=("eval.batch_size", "eval.metrics", SERVER_MAY_DIFFER)
    )
    pred_path = out_dir / PREDICTIONS_FILE
    state: dict[str, Any] = {}

    def batches(pending: list[Example]) -> Iterator[list[dict]]:
        backend = load_backend(model, generative_family(model), served=served)
        backend = BlindBackend(backend) if blind else backend
        backend.require("generate")
        backend.track_usage(usage_recorder(out_dir))
        state["bar"] = bar = tqdm(total=len(pending), disable=not progress, desc="eval", unit="ex")
        for rows in generation_rows(backend, pending, cfg):
            yield rows
            bar.update(len(rows))

    try:
        score_rows(pred_path, todo, key=lambda ex: ex.id, row_key=lambda r: r["id"], score=batches, resume=resume)
    finally:
        if "bar" in state:
            state["bar"].close()
    return out_dir, share(todo)


def _summarise(out_dir: Path, todo: Sequence[Example], cfg: EvalConfig) -> EvalMetrics:
    """The after-generation scores filled in, metrics.json written (main process)."""
    pred_path = out_dir / PREDICTIONS_FILE
    done_rows = read_jsonl(pred_path)
    wanted = {ex.id for ex in todo}
    rows = [r for r in done_rows if r["id"] in wanted]
    if add_after_generation_scores(rows, cfg, out_dir):
        write_jsonl(pred_path, done_rows)
    names = [m.name for m in per_batch_metrics()]
    counts = {n: count(rows) for n in cfg.metrics if (count := METRICS[n].counts) is not None}
    metrics = summarize(rows, names + [m for m in cfg.metrics if m not in names], counts)
    (out_dir / METRICS_FILE).write_text(json.dumps(metrics.to_dict(), indent=2), encoding="utf-8")
    return metrics


def run_eval(
    model: ModelRef,
    data: str | Path,
    out_dir: str | Path,
    *,
    settings: Mapping[str, Any],
    judge_file: str | Path | None = None,
    env_map: str | Path | None = None,
    task_rules: bool = False,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
    resume: bool = False,
    served: ServedConfig | None = None,
    blind: bool = False,
) -> EvalMetrics:
    """`robustvlm eval`: the eval settings (EvalConfig fields; `judge` read from `judge_file`, a
    YAML file) are checked before the data or the model is loaded, then `evaluate` runs; with
    `blind`, again blind into OUT/blind/, and the vision gain is written (module docstring)."""
    judge = load_judge_config(judge_file).model_dump() if judge_file else None
    check_metric_names(settings.get("metrics", []), key="--metrics")
    cfg = validate_config({**settings, "judge": judge}, "eval options", EvalConfig)
    check_needs(cfg.metrics, dict(cfg))
    examples = load_examples(data, env_map=env_map, task_rules=task_rules, image_root=image_root,
                             allow_outside_root=allow_outside_root)
    if not any(ex.split == cfg.split for ex in examples):
        present = Counter(ex.split for ex in examples)
        held = ", ".join(f"{name} ({n} records)" for name, n in sorted(present.items()))
        raise ConfigError(f"{data}: no records of split {cfg.split!r} to evaluate; it holds {held}")
    runs = [_generate(model, examples, out_dir, cfg=cfg, resume=resume, progress=True, served=served, blind=False)]
    if blind:
        runs.append(_generate(model, examples, Path(out_dir) / BLIND_FOLDER, cfg=cfg, resume=resume, progress=True,
                              served=served, blind=True))
    helpers_stop_here()  # every process of a launch generated its share; the main one summarises
    metrics, *_ = [_summarise(folder, todo, cfg) for folder, todo in runs]
    if blind:
        sections = eval_gain_sections(Path(out_dir), model, cfg.metrics)
        write_vision_gain(sections, out_dir, title="robustvlm eval: vision gain")
    return metrics


def eval_gain_sections(out_dir: Path, model: ModelRef, metrics: Sequence[str]) -> list[GainSection]:
    """The vision gain of `model` per metric of `metrics` and environment, from the per-sample
    scores of OUT/predictions.jsonl and OUT/blind/predictions.jsonl (a record whose score is
    None in either run, as CEE leaves an undecided sample, is left out of that metric's gain)."""
    normal = {r["id"]: r for r in read_jsonl(out_dir / PREDICTIONS_FILE)}
    blind = {r["id"]: r for r in read_jsonl(out_dir / BLIND_FOLDER / PREDICTIONS_FILE)}
    if set(normal) != set(blind):
        first = sorted(set(normal) ^ set(blind))[0]
        raise DataError(f"record {first!r} is in only one of {out_dir / PREDICTIONS_FILE} and its blind/ twin")
    sections = []
    for metric in metrics:
        both = [i for i in normal if None not in (normal[i]["scores"].get(metric), blind[i]["scores"].get(metric))]
        if both:
            rows = vision_gain({i: normal[i]["scores"][metric] for i in both},
                               {i: blind[i]["scores"][metric] for i in both}, {i: normal[i]["env"] for i in both})
            sections.append(GainSection({"model": model.name, "metric": metric}, blind_input(generative_family(model)),
                                        rows))
    return sections
