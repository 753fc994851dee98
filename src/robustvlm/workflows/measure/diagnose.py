"""`robustvlm diagnose`: is a model's failure on a domain visual, semantic or a mapping failure?

Writes icl_predictions.jsonl (the per-query records of its in-context stage, as `icl eval`
writes them), diagnosis.json ({config, rows, icl_rows, semantic_records}) and diagnosis.md into
its output folder (claimed like every run folder: `--resume` with the same settings reuses a
finished diagnosis, or the in-context records a killed run finished).

The in-context stage is split like `icl eval`'s (`sharding.score_rows`): between the processes
of a launch, whose main process then measures the semantic and visual stages alone; and with
`--shard I/N`, whose run folder holds only its block of the in-context records (no diagnosis):
`robustvlm merge` joins the shards and measures the rest once, as one run does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robustvlm.analysis.diagnosis import diagnose_table
from robustvlm.analysis.in_context_accuracy import IclCell
from robustvlm.config import ServedConfig, read_yaml_mapping
from robustvlm.evaluation.diagnose import measure_domains
from robustvlm.evaluation.icl_settings import DIAGNOSE_DEFAULTS, InContextSettings
from robustvlm.evaluation.in_context import evaluate_icl
from robustvlm.machine import with_machine
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import SERVER_MAY_DIFFER, load_backend, served_settings
from robustvlm.models.support import require_capability
from robustvlm.report.in_context_tables import diagnosis_markdown
from robustvlm.runs import usage_recorder, write_jsonl
from robustvlm.sharding import claim, helpers_stop_here, sharded
from robustvlm.workflows.measure.icl_eval import (
    PREDICTIONS_FILE,
    load_domains,
    record_store,
    task_corpus,
)

RESULT_FILE = "diagnosis.json"


@dataclass(frozen=True)
class Diagnosis:
    """A finished diagnosis: settings, one verdict row per domain (`diagnose_table`), and the
    measurements behind it."""

    config: dict[str, Any]
    rows: list[dict]
    icl_cells: list[IclCell]
    semantic_records: list[dict]

    def to_dict(self) -> dict:
        """The diagnosis.json content."""
        return {"config": self.config, "rows": self.rows,
                "icl_rows": [c.to_dict() for c in self.icl_cells], "semantic_records": self.semantic_records}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        return cls(dict(data["config"]), list(data["rows"]), [IclCell(**c) for c in data["icl_rows"]],
                   list(data["semantic_records"]))


def read_descriptions(path: str | Path) -> dict[str, str]:
    """{class: description} from a YAML file; ConfigError when it is missing or not a mapping."""
    data = read_yaml_mapping(path, "descriptions", "class: description")
    return {str(k): str(v) for k, v in data.items()}


def run_diagnosis(
    model: ModelRef,
    data_root: str | Path,
    out_dir: str | Path,
    settings: InContextSettings = DIAGNOSE_DEFAULTS,
    *,
    descriptions: Mapping[str, str] | str | Path | None = None,
    probe_test_fraction: float = 0.5,
    visual_min_skill: float = 0.5,
    semantic_min_skill: float = 0.5,
    mapping_min_skill: float = 0.5,
    resume: bool = False,
    served: ServedConfig | None = None,
) -> Diagnosis | None:
    """Load the model and ROOT/DOMAIN/CLASS/*.png data, measure, diagnose, write the outputs;
    None for a `--shard` run, which writes only its in-context records (module doc).

    `settings`: the in-context stage, 0 shots and `settings.most_shots` shots of the policy
    `settings.policies[0]` (`evaluation.in_context.evaluate_icl`).
    `descriptions`: {class: description} or a YAML file of them (default: WordNet glosses).
    Thresholds: see `analysis.diagnosis.diagnose_table`. `served`: the server of an
    "openai:MODEL" model (its stages that need weights are not measured: `evaluation.diagnose`).
    """
    require_capability(model, "diagnose")
    if isinstance(descriptions, str | Path):
        descriptions = read_descriptions(descriptions)
    config = {"model": model.name, "data": str(data_root), "descriptions": dict(descriptions or {}),
              "shots": settings.most_shots, "icl_policy": settings.policies[0], "n_per_env": settings.n_per_env,
              "seed": settings.seed, "probe_test_fraction": probe_test_fraction, "visual_min_skill": visual_min_skill,
              "semantic_min_skill": semantic_min_skill, "mapping_min_skill": mapping_min_skill,
              "max_new_tokens": settings.max_new_tokens, "repetition_penalty": settings.repetition_penalty,
              **served_settings(model, served)}
    out = claim(out_dir, config, command="diagnose", resume=resume, may_differ=(SERVER_MAY_DIFFER,))
    if resume and (out / RESULT_FILE).is_file():
        return Diagnosis.from_dict(json.loads((out / RESULT_FILE).read_text(encoding="utf-8")))
    examples = load_domains(data_root)
    backend = load_backend(model, corpus=task_corpus(examples), served=served)
    backend.require("generate")
    backend.track_usage(usage_recorder(out))
    records: list[dict] = []
    icl_cells = evaluate_icl(backend, examples, settings, store=record_store(out / PREDICTIONS_FILE, resume=resume),
                             predictions=records)
    helpers_stop_here()  # the other processes of a launch are done: the main one measures the rest
    write_jsonl(out / PREDICTIONS_FILE, records)  # in evaluation order
    if sharded():
        return None
    measured = measure_domains(backend, examples, icl_cells, settings, descriptions=descriptions,
                               probe_test_fraction=probe_test_fraction)
    rows = diagnose_table(measured.rows, visual_min_skill=visual_min_skill,
                          semantic_min_skill=semantic_min_skill, mapping_min_skill=mapping_min_skill)
    result = Diagnosis(config, rows, measured.icl_cells, measured.semantic_records)
    (out / RESULT_FILE).write_text(json.dumps(with_machine(result.to_dict()), indent=2), encoding="utf-8")
    (out / "diagnosis.md").write_text(
        f"# Failure diagnosis\n\nmodel: `{model.name}`\n\n{diagnosis_markdown(rows)}\n", encoding="utf-8"
    )
    return result
