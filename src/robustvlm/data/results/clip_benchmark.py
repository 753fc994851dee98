"""clip_benchmark's results (LAION-AI/CLIP_benchmark): `clip_benchmark eval` writes one JSON per
(model, pretrained, dataset), `{"dataset", "model", "pretrained", "task", "metrics": {"acc1",
"acc5", "mean_per_class_recall"}, "language"}` (named `{dataset}_{pretrained}_{model}_{language}_{task}.json`
by default); `clip_benchmark build` gathers them into one CSV with the metrics as columns.

Read: one such JSON, a folder of them, or the `build` CSV. A model is `MODEL PRETRAINED`; its
family the pretraining source of its `pretrained` tag (`openclip.pretraining_source`, the same
tags); the bench is the `dataset` as written (`imagenet1k`, `wds/imagenet-r`); the accuracy
`acc1`. Records of other tasks (retrieval, captioning: no `acc1`) are skipped and listed. The
files give no question counts (see `data.results.sizes`).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from robustvlm.data.results.openclip import pretraining_source
from robustvlm.data.results.table import ResultTable, accuracy_row, fraction
from robustvlm.errors import DataError

KEYS = ("dataset", "model", "pretrained")


def _json_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def _is_record(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and all(k in data for k in KEYS) and isinstance(data.get("metrics"), dict)


def looks_like(path: Path) -> bool:
    """A clip_benchmark JSON, a folder whose first JSON is one, or a `build` CSV (columns
    dataset, model, pretrained, acc1)."""
    if path.suffix.lower() == ".csv" and path.is_file():
        with path.open(encoding="utf-8-sig", newline="") as f:
            header = set(next(csv.reader(f), []))
        return {*KEYS, "acc1"} <= header
    files = _json_files(path) if path.is_dir() else ([path] if path.suffix.lower() == ".json" else [])
    return bool(files) and _is_record(files[0])


def read(path: Path) -> ResultTable:
    """Accuracy rows (acc1, n None) of every zero-shot classification record."""
    table = ResultTable()
    if path.suffix.lower() == ".csv" and path.is_file():
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            for raw in reader:
                _add(table, raw, raw.get("acc1"), str(path), reader.line_num)
    else:
        for file in _json_files(path):
            _add_json(table, file)
    if not table.accuracies:
        raise DataError("no zero-shot classification result (metrics.acc1) found", str(path))
    return table


def _add_json(table: ResultTable, file: Path) -> None:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"not a readable JSON file ({err})", str(file)) from err
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        raise DataError("not a clip_benchmark result: no `metrics` object", str(file))
    _add(table, data, data["metrics"].get("acc1"), str(file), file.name)


def _add(table: ResultTable, record: dict, acc1: object, source: str, where: str | int) -> None:
    missing = [k for k in KEYS if not str(record.get(k) or "").strip()]
    if missing:
        raise DataError(f"no {', '.join(missing)} in the clip_benchmark record", source, where)
    if acc1 in (None, ""):
        table.skipped.append(f"{source}: {record['dataset']} ({record.get('task', 'no task')}): no acc1")
        return
    tag = str(record["pretrained"])
    table.accuracies.append(accuracy_row(
        f"{record['model']} {tag}", pretraining_source(tag), str(record["dataset"]),
        fraction(acc1, "metrics.acc1", source, where), None, where,
        pretrained=tag, source=pretraining_source(tag)))
