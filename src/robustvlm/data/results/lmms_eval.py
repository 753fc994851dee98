"""lmms-eval's output (EvolvingLMMs-Lab/lmms-eval): its evaluation tracker writes, under
`OUTPUT/MODEL_SANITIZED/`, `DATE_results.json` (`{"results": {task: {"alias", "METRIC,FILTER":
value, "METRIC_stderr,FILTER": se}}, "n-samples": {task: {"original", "effective"}},
"model_name", "config", ...}`) and, with `--log_samples`, `DATE_samples_TASK.jsonl`, one line per
document: `{"doc_id", "target", "filtered_resps", "doc_hash", ..., METRIC: per-sample score}`.

Read: a results file, a samples file, or a folder holding them. The bench is the task; the model
the `model_name` of the results file (or of the results file of the same DATE beside a samples
file), else the folder's name. The accuracy of a task is its first metric, in the file's order,
whose value is a fraction in [0, 1] (`METRIC,FILTER`; stderr entries are not metrics); others are
skipped and listed. n is the task's `n-samples.effective`. A samples file gives one question row
per document (id = doc_id, correct = its per-sample score of that metric, or of its only numeric
field), so `compare` pairs two models' samples by doc_id.
"""

from __future__ import annotations

import json
from pathlib import Path

from robustvlm.data.results.table import (
    ResultTable,
    accuracies_from_questions,
    accuracy_row,
    fraction,
)
from robustvlm.errors import DataError
from robustvlm.runs import read_input_jsonl

RESULTS_SUFFIX = "_results.json"
SAMPLES_MARK = "_samples_"
#: the fields lmms-eval writes in every sample beside the task's per-sample metrics
SAMPLE_FIELDS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "doc_hash",
                           "prompt_hash", "target_hash", "input", "input_media", "token_counts"})


def _files(path: Path) -> tuple[list[Path], list[Path]]:
    """(results files, samples files) at `path` (a file or a folder)."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    results = [f for f in files if f.name.endswith(RESULTS_SUFFIX)]
    samples = [f for f in files if SAMPLES_MARK in f.name and f.suffix == ".jsonl"]
    return results, samples


def looks_like(path: Path) -> bool:
    """A `*_results.json` with a `results` object, a `*_samples_*.jsonl`, or a folder of them."""
    results, samples = _files(path)
    if results:
        try:
            return isinstance(json.loads(results[0].read_text(encoding="utf-8")).get("results"), dict)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            return False
    return bool(samples)


def read(path: Path) -> ResultTable:
    """Accuracy rows of every results file and question rows of every samples file at `path`."""
    results, samples = _files(path)
    if not results and not samples:
        raise DataError(f"no lmms-eval *{RESULTS_SUFFIX} or *{SAMPLES_MARK}*.jsonl file", str(path))
    table = ResultTable()
    metrics: dict[tuple[str, str], str] = {}  # (date, task) -> metric of its accuracy
    models: dict[str, str] = {}  # date -> model
    for file in results:
        _add_results(table, file, metrics, models)
    for file in samples:
        date, task = file.stem.split(SAMPLES_MARK, 1)
        model = models.get(date) or _model_beside(file, date)
        table.questions.extend(_sample_rows(file, model, task, metrics.get((date, task))))
    if not results:
        table.accuracies = accuracies_from_questions(table.questions)
    return table


def _model_beside(samples: Path, date: str) -> str:
    """The model of the results file of the same run beside a samples file, else the folder name."""
    beside = samples.with_name(f"{date}{RESULTS_SUFFIX}")
    if beside.is_file():
        try:
            name = json.loads(beside.read_text(encoding="utf-8")).get("model_name")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            name = None
        if name:
            return str(name)
    return samples.resolve().parent.name


def _add_results(table: ResultTable, file: Path, metrics: dict[tuple[str, str], str], models: dict[str, str]) -> None:
    source = str(file)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"not a readable JSON file ({err})", source) from err
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise DataError("not an lmms-eval results file: no `results` object", source)
    date = file.name.removesuffix(RESULTS_SUFFIX)
    model = models.setdefault(date, str(data.get("model_name") or file.resolve().parent.name))
    counts = data.get("n-samples") or {}
    for task, values in data["results"].items():
        if not isinstance(values, dict):
            raise DataError("a task's results must be an object of metrics", source, f"results.{task}")
        key = _accuracy_key(values)
        if key is None:
            table.skipped.append(f"{source}: task {task}: no metric is a fraction in [0, 1]")
            continue
        metrics[(date, task)] = key.split(",", 1)[0]
        n = (counts.get(task) or {}).get("effective")
        table.accuracies.append(accuracy_row(model, model, task, float(values[key]), int(n) if n else None,
                                             f"results.{task}", metric=key))


def _accuracy_key(values: dict) -> str | None:
    """The first `METRIC,FILTER` key (not a stderr, not the alias) holding a fraction in [0, 1]."""
    for key, value in values.items():
        if key == "alias" or "_stderr" in key or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) and 0.0 <= value <= 1.0:
            return str(key)
    return None


def _sample_rows(file: Path, model: str, task: str, metric: str | None) -> list[dict]:
    source = str(file)
    rows = []
    for line, sample in read_input_jsonl(file, "lmms-eval samples file"):
        if "doc_id" not in sample:
            raise DataError("a sample without doc_id", source, line)
        name = metric or _only_score(sample, source, line)
        if name not in sample:
            raise DataError(f"a sample without its score {name!r}", source, line)
        score = fraction(float(sample[name]) if isinstance(sample[name], bool) else sample[name],
                         f"score {name!r}", source, line)
        rows.append({"model": model, "bench": task, "id": str(sample["doc_id"]), "correct": score, "env": task,
                     "line": line})
    return rows


def _only_score(sample: dict, source: str, line: int) -> str:
    """The sample's one numeric field beside lmms-eval's own (SAMPLE_FIELDS)."""
    names = [k for k, v in sample.items() if k not in SAMPLE_FIELDS and isinstance(v, (int, float))]
    if len(names) != 1:
        raise DataError(f"cannot tell the per-sample score: numeric fields {names} (give the results file too)",
                        source, line)
    return names[0]
