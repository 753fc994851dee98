"""lmms-eval's output (EvolvingLMMs-Lab/lmms-eval; checked against 0.7.3's `EvaluationTracker`):
`--output_path OUT` writes, per run, `OUT/MODEL/DATE_results.json` (MODEL the model name with `/`
as `__`, DATE `%Y%m%d_%H%M%S`; `{"results": {task: {"alias", "samples", "METRIC,FILTER": value,
"METRIC_stderr,FILTER": se}}, "n-samples": {task: {"original", "effective"}}, "model_name", ...}`)
and, with `--log_samples`, `OUT/MODEL/DATE_samples_TASK.jsonl`, one line per document
(`{"doc_id", "target", "filtered_resps", "doc_hash", ..., METRIC: per-sample score}`). A re-run
adds files of a new DATE to the same folder.

Read: a results file, a samples file, a model folder, or OUT (a folder of model folders).

- **Model**: the run's `model_name` (of the results file of the same DATE beside a samples file),
  else the folder's name.
- **Re-runs**: never pooled. Of each (model, task), the latest DATE that has the task is read,
  or with `--run DATE` that DATE's; the other runs of the task are listed as skipped.
- **Accuracy of a task**: its main metric, by the task's shape: the `average` metric where the
  task has one (MMStar: the mean over its categories), else `overall`, else the first metric the
  task lists (lmms-eval writes them in the task's `metric_list` order). A metric whose value is an
  object is read at its `average`, `overall`, `accuracy` or `acc` key in that order.
  Stderr entries and `samples` are not metrics.
- **Scale**: a fraction in [0, 1] as it is; a percentage where the task is listed in
  `PERCENT_METRICS` (`mmbench_*`'s `gpt_eval_score` is `overall_acc * 100`), or where the metric's
  name says accuracy (holds `acc`) and its value lies in (1, 100]: divided by 100. Any other value
  (a score out of 2000, text, null, NaN) leaves the task out, listed; a boolean is refused.
- **n**: the task's `n-samples.effective` (a positive integer; anything else is refused).
- **Samples**: one question row per document (id = doc_id, correct = the per-sample value of the
  accuracy's metric, or its `score` where that value is an object as MMStar's are; the object's
  text fields, e.g. `l2_category`, kept as columns). A doc_id held twice is refused. A samples file
  whose per-sample value holds no score (MMBench's predictions, scored only at aggregation) or no
  lines is listed as skipped. Without the results file, a task's accuracy is the mean of its
  per-sample scores when they are numbers; when they are objects (the task aggregates them its
  own way) the accuracy needs the results file and is listed as skipped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from robustvlm.data.results.table import (
    ReadOptions,
    ResultTable,
    accuracy_row,
    count,
    fraction,
)
from robustvlm.data.results.text import check_regular, read_json
from robustvlm.errors import DataError
from robustvlm.runs import read_input_jsonl

RESULTS_SUFFIX = "_results.json"
#: the DATE lmms-eval prefixes its files with (`%Y%m%d_%H%M%S`; older versions an ISO time)
DATED = re.compile(r"^\d{4}-?\d{2}-?\d{2}[T_]\d{2}-?\d{2}-?\d{2}")
SAMPLES_MARK = "_samples_"
#: the fields lmms-eval writes in every sample beside the task's per-sample metrics
SAMPLE_FIELDS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "doc_hash",
                           "prompt_hash", "target_hash", "input", "input_media", "token_counts"})
#: metric names preferred as a task's accuracy, in this order, before its first metric
MAIN_METRICS = ("average", "overall")
#: keys of an object-valued aggregate read as its accuracy, in this order
OBJECT_KEYS = ("average", "overall", "accuracy", "acc")
#: (task name prefix, metric) whose value lmms-eval writes as a percentage
PERCENT_METRICS = (("mmbench_", "gpt_eval_score"),)


@dataclass
class _Run:
    """One run's files: its DATE, results file (None for samples alone) and samples files by task."""

    folder: Path
    date: str
    results: Path | None = None
    samples: dict[str, Path] = field(default_factory=dict)

    @cached_property
    def data(self) -> dict:
        """The results file's content, checked: `results` an object of objects ({} without one)."""
        if self.results is None:
            return {}
        data = _json_object(self.results)
        if not isinstance(data.get("results"), dict):
            raise DataError("not an lmms-eval results file: no `results` object", str(self.results))
        for task, values in data["results"].items():
            if not isinstance(values, dict):
                raise DataError("a task's results must be an object of metrics", str(self.results), f"results.{task}")
        return data


def _is_results(file: Path) -> bool:
    return file.name.endswith(RESULTS_SUFFIX)


def _is_samples(file: Path) -> bool:
    return SAMPLES_MARK in file.name and file.suffix == ".jsonl"


def _runs(path: Path) -> list[_Run]:
    """The runs at `path`: a file, a model folder, or a folder of model folders."""
    if not path.is_dir():
        files = [path]
    else:
        files = sorted(f for f in path.iterdir() if f.is_file() and (_is_results(f) or _is_samples(f)))
        if not files:
            files = sorted(f for sub in path.iterdir() if sub.is_dir() for f in sub.iterdir()
                           if f.is_file() and (_is_results(f) or _is_samples(f)))
    runs: dict[tuple[Path, str], _Run] = {}
    for file in files:
        if _is_results(file):
            date = file.name.removesuffix(RESULTS_SUFFIX)
            runs.setdefault((file.parent, date), _Run(file.parent, date)).results = file
        elif _is_samples(file):
            date, task = file.stem.split(SAMPLES_MARK, 1)
            runs.setdefault((file.parent, date), _Run(file.parent, date)).samples[task] = file
    return list(runs.values())


def looks_like(path: Path) -> bool:
    """A `*_results.json` with a `results` object, a `*_samples_*.jsonl`, or a folder (of folders) of them."""
    if path.is_file() and not (_is_results(path) or _is_samples(path)):
        return False
    runs = _runs(path)
    for run in runs:
        if run.results is not None:
            try:
                return isinstance(_json_object(run.results).get("results"), dict)
            except DataError:  # a broken file named as lmms-eval names its files: its reader says what is wrong
                return DATED.match(run.results.name) is not None
    return bool(runs)


def read(path: Path, options: ReadOptions | None = None) -> ResultTable:
    """Accuracy rows and question rows of the runs at `path`, one run per (model, task) (module doc)."""
    options = options or ReadOptions()
    runs = _runs(path)
    if not runs:
        raise DataError(f"no lmms-eval *{RESULTS_SUFFIX} or *{SAMPLES_MARK}*.jsonl file (here or in a "
                        "model folder below)", str(path))
    if options.run is not None and all(run.date != options.run for run in runs):
        raise DataError(f"--run {options.run}: no run of that DATE (runs: {', '.join(sorted({r.date for r in runs}))})",
                        str(path))
    table = ResultTable()
    chosen = _choose(runs, options.run, table)
    for (model, task), run in chosen.items():
        _read_task(table, run, model, task)
    return table


def _choose(runs: list[_Run], wanted: str | None, table: ResultTable) -> dict[tuple[str, str], _Run]:
    """(model, task) -> the run read for it: the latest run holding the task, or the `wanted` DATE's;
    every other run of it is listed as skipped."""
    held: dict[tuple[str, str], list[_Run]] = {}
    for run in runs:
        model = _model(run)
        for task in dict.fromkeys([*_results_tasks(run), *run.samples]):
            held.setdefault((model, task), []).append(run)
    chosen = {}
    for key, candidates in held.items():
        candidates.sort(key=lambda r: r.date)
        pick = next((r for r in candidates if r.date == wanted), None) if wanted else candidates[-1]
        for run in candidates:
            if run is not pick:
                why = (f"run {run.date} of task {key[1]} is not --run {wanted}" if wanted else
                       f"an earlier run ({run.date}) of task {key[1]}; the latest, {pick.date if pick else ''}, is "
                       "read (--run DATE picks another; runs are never pooled)")
                table.skip(str(run.results or run.samples[key[1]]), key[1], why)
        if pick is not None:
            chosen[key] = pick
    return chosen


def _json_object(file: Path) -> dict:
    data = read_json(file, "lmms-eval results file")
    if not isinstance(data, dict):
        raise DataError("not an lmms-eval results file: not a JSON object", str(file))
    return data


def _results_tasks(run: _Run) -> list[str]:
    return list(run.data.get("results", {}))


def _model(run: _Run) -> str:
    """The run's `model_name` (its results file's, or that of the results file of its DATE beside
    its samples), else its folder's name."""
    beside = run.results or run.folder / f"{run.date}{RESULTS_SUFFIX}"
    if beside.is_file():
        name = (run.data if run.results else _json_object(beside)).get("model_name")
        if isinstance(name, str) and name.strip():
            return name.strip()
    return run.folder.resolve().name


def _read_task(table: ResultTable, run: _Run, model: str, task: str) -> None:
    """The task's accuracy row (from the results file, else from its samples) and question rows."""
    metric: str | None = None
    if run.results is not None and task in run.data["results"]:
        metric = _add_accuracy(table, run.results, run.data, model, task)
    samples = run.samples.get(task)
    if samples is None:
        return
    rows, objects = _sample_rows(table, samples, model, task, metric)
    table.questions.extend(rows)
    if run.results is None and rows:
        if objects:
            table.skip(str(samples), task, "the accuracy of a task whose per-sample scores are objects is its own "
                       "aggregate, not their mean: give its results file")
        else:
            mean = sum(r["correct"] for r in rows) / len(rows)
            table.accuracies.append(accuracy_row(model, model, task, mean, len(rows), rows[0]["line"]))


def _add_accuracy(table: ResultTable, file: Path, data: dict, model: str, task: str) -> str | None:
    """Add the task's accuracy row; the metric it read (None when the task is listed as skipped)."""
    source, values = str(file), data["results"][task]
    key = _main_key(values)
    if key is None:
        table.skip(source, f"results.{task}", "no metric (METRIC,FILTER entry) to read")
        return None
    metric = key.split(",", 1)[0]
    value = _accuracy_value(values[key], source, f"results.{task}.{key}")
    if isinstance(value, str):
        table.skip(source, f"results.{task}", value)
        return metric
    percent = any(task.startswith(p) and metric == m for p, m in PERCENT_METRICS)
    if percent or ("acc" in metric and 1.0 < value <= 100.0):
        if not 0.0 <= value <= 100.0:
            table.skip(source, f"results.{task}", f"{key} = {value!r} is not a percentage")
            return metric
        value /= 100.0
    elif not 0.0 <= value <= 1.0:
        table.skip(source, f"results.{task}", f"{key} = {value!r} is not a fraction and not a percent-scale "
                   "accuracy (a score of another kind)")
        return metric
    table.accuracies.append(accuracy_row(model, model, task, value, _n(data, task, source), f"results.{task}",
                                         metric=key))
    return metric


def _main_key(values: dict) -> str | None:
    """The task's accuracy key (module doc): `average`, else `overall`, else its first metric."""
    keys = [k for k in values if "," in k and "_stderr" not in k.split(",", 1)[0]]
    for name in MAIN_METRICS:
        match = next((k for k in keys if k.split(",", 1)[0] == name), None)
        if match is not None:
            return match
    return keys[0] if keys else None


def _accuracy_value(value: object, source: str, where: str) -> float | str:
    """The number a metric's value holds, or why it holds none (a str); a boolean is refused."""
    if isinstance(value, dict):
        inner = next((k for k in OBJECT_KEYS if k in value), None)
        if inner is None:
            return f"the metric is an object without any of the keys {', '.join(OBJECT_KEYS)}"
        value, where = value[inner], f"{where}.{inner}"
    if isinstance(value, bool):
        raise DataError(f"an accuracy must be a number, got the boolean {value!r}", source, where)
    if not isinstance(value, (int, float)):
        return f"{where.rsplit('.', 1)[-1]} is {value!r}, not a number"
    if math.isnan(value):
        return f"{where.rsplit('.', 1)[-1]} is NaN (the tool could not score the task)"
    return float(value)


def _n(data: dict, task: str, source: str) -> int | None:
    """The task's `n-samples.effective` (None when the file has no n-samples for it)."""
    counts = data.get("n-samples")
    if counts is None:
        return None
    if not isinstance(counts, dict):
        raise DataError(f"n-samples must be an object of tasks, got {counts!r}", source, "n-samples")
    entry = counts.get(task)
    if entry is None:
        return None
    if not isinstance(entry, dict) or "effective" not in entry:
        raise DataError(f"must be an object with `effective` (the documents scored), got {entry!r}", source,
                        f"n-samples.{task}")
    return count(entry["effective"], "effective (documents scored)", source, f"n-samples.{task}")


def _sample_rows(table: ResultTable, file: Path, model: str, task: str,
                 metric: str | None) -> tuple[list[dict], bool]:
    """(question rows of a samples file, whether its scores were objects); listed as skipped when
    it has no lines or its samples hold no score."""
    source = str(file)
    check_regular(file, "lmms-eval samples file")
    lines = read_input_jsonl(file, "lmms-eval samples file")
    if not lines:
        table.skip(source, task, "the samples file has no samples")
        return [], False
    rows: list[dict] = []
    seen: dict[str, int] = {}
    objects = False
    for line, sample in lines:
        if "doc_id" not in sample:
            raise DataError("a sample without doc_id", source, line)
        doc = str(sample["doc_id"])
        if doc in seen:
            raise DataError(f"doc_id {doc} is held twice (first on line {seen[doc]}): a run scores each document "
                            "once", source, line)
        seen[doc] = line
        name = metric or _score_field(sample, source, line)
        if name not in sample:
            raise DataError(f"a sample without its score {name!r}", source, line)
        value, extra = sample[name], {}
        if isinstance(value, dict):
            if "score" not in value:
                table.skip(source, task, f"the per-sample {name!r} holds no score (the task scores its samples "
                           "only when it aggregates them): per-question rows cannot be read")
                return [], False
            objects = True
            extra = {k: v for k, v in value.items() if isinstance(v, str) and k not in ("model", "bench", "id")}
            value = value["score"]
        score = fraction(float(value) if isinstance(value, bool) else value, f"score {name!r}", source, line)
        rows.append({**extra, "model": model, "bench": task, "id": doc, "correct": score, "env": task, "line": line})
    return rows, objects


def _score_field(sample: dict, source: str, line: int) -> str:
    """The per-sample score's field of a sample read without its results file: `average` or
    `overall` where present, else its one numeric (or object) field beside lmms-eval's own."""
    names = [k for k, v in sample.items() if k not in SAMPLE_FIELDS and isinstance(v, (int, float, dict))]
    preferred = [n for n in MAIN_METRICS if n in names]
    if preferred:
        return preferred[0]
    if len(names) != 1:
        raise DataError(f"cannot tell the per-sample score: fields {names} (give the results file too)", source, line)
    return names[0]
