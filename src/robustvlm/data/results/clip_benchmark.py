"""clip_benchmark's results (LAION-AI/CLIP_benchmark): `clip_benchmark eval` writes one JSON per
(model, pretrained, dataset), `{"dataset", "model", "pretrained", "task", "metrics": {"acc1",
"acc5", "mean_per_class_recall"}, "language"}` (named `{dataset}_{pretrained}_{model}_{language}_{task}.json`
by default); `clip_benchmark build` gathers them into one CSV with the metrics as columns.

Read: one such JSON, a folder of them, or the `build` CSV. A model is `MODEL PRETRAINED`; its
family the pretraining source of its `pretrained` tag (`openclip.pretraining_source`, the same
tags); the bench is the `dataset` as written (`imagenet1k`, `wds/imagenet-r`); the accuracy
`acc1`. Records of other tasks (retrieval, captioning, linear probes: `task` other than
`zeroshot_classification`, or no `acc1`) are skipped and listed. The files give no question
counts (see `data.results.sizes`). Checked against clip_benchmark 1.6.2's `eval` writer
(`tools/write_result_fixtures.py`).
"""

from __future__ import annotations

from pathlib import Path

from robustvlm.data.results.openclip import pretraining_source
from robustvlm.data.results.table import ReadOptions, ResultTable, accuracy_row, fraction
from robustvlm.data.results.text import csv_header, csv_records, read_json
from robustvlm.errors import DataError

KEYS = ("dataset", "model", "pretrained")
#: the task whose acc1 is read (clip_benchmark's default task of a classification dataset)
CLASSIFICATION = "zeroshot_classification"


def _json_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def _is_record(path: Path) -> bool:
    try:
        data = read_json(path, "file")
    except DataError:
        return False
    return isinstance(data, dict) and all(k in data for k in KEYS) and isinstance(data.get("metrics"), dict)


def looks_like(path: Path) -> bool:
    """A clip_benchmark JSON, a folder whose first JSON is one, or a `build` CSV (columns
    dataset, model, pretrained, acc1)."""
    if path.suffix.lower() == ".csv":
        return {*KEYS, "acc1"} <= set(csv_header(path) or [])
    files = _json_files(path) if path.is_dir() else ([path] if path.suffix.lower() == ".json" else [])
    return bool(files) and _is_record(files[0])


def read(path: Path, options: ReadOptions | None = None) -> ResultTable:
    """Accuracy rows (acc1, n None) of every zero-shot classification record."""
    table = ResultTable()
    if path.suffix.lower() == ".csv" and not path.is_dir():
        for line, raw in csv_records(path, "clip_benchmark build CSV")[1]:
            _add(table, raw, raw.get("acc1"), str(path), line)
    else:
        for file in _json_files(path):
            _add_json(table, file)
    if not table.accuracies:
        raise DataError("no zero-shot classification result (metrics.acc1) found", str(path))
    return table


def _add_json(table: ResultTable, file: Path) -> None:
    data = read_json(file, "clip_benchmark result")
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        raise DataError("not a clip_benchmark result: no `metrics` object", str(file))
    _add(table, data, data["metrics"].get("acc1"), str(file), file.name)


def _add(table: ResultTable, record: dict, acc1: object, source: str, where: str | int) -> None:
    missing = [k for k in KEYS if not str(record.get(k) or "").strip()]
    if missing:
        raise DataError(f"no {', '.join(missing)} in the clip_benchmark record", source, where)
    task = str(record.get("task") or CLASSIFICATION)
    if task != CLASSIFICATION:
        table.skip(source, where, f"{record['dataset']}: task {task}, not {CLASSIFICATION}")
        return
    if acc1 in (None, ""):
        table.skip(source, where, f"{record['dataset']}: no acc1")
        return
    tag = str(record["pretrained"])
    table.accuracies.append(accuracy_row(
        f"{record['model']} {tag}", pretraining_source(tag), str(record["dataset"]),
        fraction(acc1, "metrics.acc1", source, where), None, where,
        pretrained=tag, source=pretraining_source(tag)))
