"""`robustvlm icl eval`: zero-shot and k-shot accuracy per domain and demo policy.

Writes in its output folder: config.resolved.yaml (the run's settings), icl_predictions.jsonl
(one line per (shots, policy, query), appended as each batch finishes, put in evaluation order at
the end), icl_results.json ({config, rows}) and icl_results.md. With `resume` the finished lines
are kept (a torn last line from a killed run is dropped) and only the missing queries are
evaluated; a folder written with other settings (batch size aside) is refused. The prompts are
split like every scoring command's questions (`sharding.score_rows`: between the processes of an
`accelerate launch` / `torchrun`, and with `--shard I/N` into folders `robustvlm merge` joins),
in evaluation order: cell by cell (shots, policy), queries in order. With `blind`:
blind/, the same files from the model asked with every image removed (the query's and the
demos': `models.blind`), and vision_gain.csv / .json / .md / .html, with-image minus blind
accuracy per (shots, policy) and domain with a paired bootstrap interval (`report.vision_gain`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robustvlm.analysis.in_context_accuracy import IclCell
from robustvlm.analysis.vision_gain import vision_gain
from robustvlm.config import ServedConfig
from robustvlm.data.loaders import load_examples
from robustvlm.data.records import Example
from robustvlm.errors import DataError
from robustvlm.evaluation.icl_settings import DEFAULTS, InContextSettings
from robustvlm.evaluation.in_context import IclQuery, RecordStore, Score, evaluate_icl, record_key
from robustvlm.machine import with_machine
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import SERVER_MAY_DIFFER, Backend, load_backend, served_settings
from robustvlm.models.blind import BlindBackend, blind_input
from robustvlm.models.support import require_capability
from robustvlm.report.in_context_tables import icl_markdown
from robustvlm.report.vision_gain import GainSection, write_vision_gain
from robustvlm.runs import usage_recorder, write_jsonl
from robustvlm.sharding import claim, helpers_stop_here, is_main, score_rows

PREDICTIONS_FILE = "icl_predictions.jsonl"
BLIND_FOLDER = "blind"  # the blind run's own folder inside the run's (`--blind`)


@dataclass(frozen=True)
class IclRun:
    """A finished in-context evaluation: its settings and its cells."""

    config: dict[str, Any]
    cells: list[IclCell]

    def to_dict(self) -> dict:
        """The icl_results.json content."""
        return {"config": self.config, "rows": [c.to_dict() for c in self.cells]}


def task_corpus(examples: Sequence[Example]) -> list[str]:
    """The instructions and targets of `examples`: what a "tiny:" model's tokenizer is trained on."""
    return sorted({ex.instruction for ex in examples} | {ex.target for ex in examples})


def load_domains(data_root: str | Path) -> list[Example]:
    """An image-folder domain dataset ROOT/DOMAIN/CLASS/*.png; DataError when it holds none."""
    examples = load_examples(data_root, fmt="folder", verbose=False)
    if not examples:
        raise DataError("no images found (expected ROOT/DOMAIN/CLASS/*.png)", str(data_root))
    return examples


def run_icl(
    model: ModelRef,
    data_root: str | Path,
    out_dir: str | Path,
    settings: InContextSettings = DEFAULTS,
    *,
    resume: bool = False,
    progress: bool = True,
    served: ServedConfig | None = None,
    blind: bool = False,
) -> IclRun:
    """Load the model (`served`: the server of an "openai:MODEL" model) and the domains, run
    `evaluate_icl` with `settings`, write the outputs (module doc); with `blind`, again blind
    into OUT/blind/ and the vision gain."""
    require_capability(model, "icl")
    config = {"model": model.name, "data": str(data_root), "shots": list(settings.shots),
              "policies": list(settings.policies), "n_per_env": settings.n_per_env, "seed": settings.seed,
              "batch_size": settings.batch_size, "max_new_tokens": settings.max_new_tokens,
              "repetition_penalty": settings.repetition_penalty, **served_settings(model, served)}
    may_differ = ("batch_size", SERVER_MAY_DIFFER)
    out = claim(out_dir, config, command="icl eval", resume=resume, may_differ=may_differ)
    blind_out = claim(out / BLIND_FOLDER, {**config, "blind": True}, command="icl eval --blind",
                      resume=resume, may_differ=may_differ) if blind else None
    examples = load_domains(data_root)
    backend = load_backend(model, corpus=task_corpus(examples), served=served)
    backend.require("generate")
    backend.track_usage(usage_recorder(out))
    run, predictions = _evaluate_into(out, backend, examples, settings, config, resume=resume, progress=progress)
    if blind_out is None:
        helpers_stop_here()  # the other processes of a launch are done: the main one wrote the files
        return run
    _, blind_predictions = _evaluate_into(blind_out, BlindBackend(backend), examples, settings, config,
                                          resume=resume, progress=progress)
    helpers_stop_here()
    sections = icl_gain_sections(predictions, blind_predictions, model, blind_input(backend.family))
    write_vision_gain(sections, out, title="robustvlm icl eval: vision gain")
    return run


def record_store(path: Path, *, resume: bool) -> RecordStore:
    """The `RecordStore` of a run folder's per-query file `path`: `sharding.score_rows` (the
    records already there kept with `resume`, the rest split between the processes of a launch,
    this run's `--shard` block only)."""

    def store(items: list[IclQuery], score: Score) -> list[dict]:
        return score_rows(path, items, key=lambda item: item.key, row_key=record_key, score=score, resume=resume)

    return store


def _evaluate_into(
    out: Path, backend: Backend, examples: list[Example], settings: InContextSettings, config: dict[str, Any], *,
    resume: bool, progress: bool,
) -> tuple[IclRun, list[dict]]:
    """`evaluate_icl` with `settings`, its outputs written into `out` (by the main process of a
    launch); (the run, its per-query records)."""
    log_path = out / PREDICTIONS_FILE
    predictions: list[dict] = []
    cells = evaluate_icl(backend, examples, settings, store=record_store(log_path, resume=resume),
                         predictions=predictions, progress=progress)
    run = IclRun(config, cells)
    if is_main():
        (out / "icl_results.json").write_text(json.dumps(with_machine(run.to_dict()), indent=2), encoding="utf-8")
        (out / "icl_results.md").write_text(
            f"# In-context evaluation\n\nmodel: `{config['model']}`\n\n{icl_markdown(cells)}\n", encoding="utf-8"
        )
        write_jsonl(log_path, predictions)  # in evaluation order
    return run, predictions


def icl_gain_sections(normal: Sequence[dict], blind: Sequence[dict], model: ModelRef, blind_input: str) -> list[GainSection]:
    """The vision gain of every (shots, policy) per domain, from the per-query records of the
    normal and the blind run."""
    cells: dict[tuple[int, str], dict[str, tuple[dict, dict]]] = {}
    for records, run in ((normal, 0), (blind, 1)):
        for r in records:
            pair = cells.setdefault((int(r["shots"]), str(r["policy"])), {}).setdefault(str(r["id"]), ({}, {}))
            pair[run].update(r)
    sections = []
    for (k, policy), pairs in cells.items():
        missing = [i for i, (a, b) in pairs.items() if not (a and b)]
        if missing:
            raise DataError(f"query {missing[0]!r} ({k} shots, policy {policy!r}) is in only one of the run and "
                            "its blind twin")
        keys = list(pairs)
        rows = vision_gain({i: float(pairs[i][0]["correct"]) for i in keys},
                           {i: float(pairs[i][1]["correct"]) for i in keys}, {i: pairs[i][0]["domain"] for i in keys})
        sections.append(GainSection({"model": model.name, "shots": str(k), "policy": policy}, blind_input, rows))
    return sections
