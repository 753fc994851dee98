"""Results files written the way each tool's own writer writes them (read from their
repositories; our code, not theirs), for the readers' tests.

- clip_benchmark (`clip_benchmark/cli.py`, main_eval): `json.dump` of {"dataset", "model",
  "pretrained", "task", "metrics": {"acc1", "acc5", "mean_per_class_recall"}, "language"} to
  `{dataset}_{pretrained}_{model}_{language}_{task}.json` ("/" in the dataset made "_").
- lmms-eval (`lmms_eval/loggers/evaluation_tracker.py`): under OUTPUT/MODEL_SANITIZED/,
  `json.dumps(results, indent=2)` to `DATE_results.json` (results, n-samples, configs, the
  tracker's model_name ...) and, per task, one `json.dumps(sample) + "\n"` per document to
  `DATE_samples_TASK.jsonl` (doc_id, target as text, filtered_resps, doc_hash, the metric).
- VLMEvalKit (`vlmeval/smp/file.py` dump, `vlmeval/dataset/utils/multiple_choice.py`): pandas
  frames written with `to_excel(index=False)` (.xlsx), `to_csv(sep="\t", index=False,
  quoting=QUOTE_ALL)` (.tsv), and `report_acc`'s frame (split, Overall, categories) with
  `to_csv(index=False, quoting=QUOTE_ALL)` as `_acc.csv`.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

DATE = "20260101_120000"


def clip_benchmark_json(folder: Path, dataset: str, model: str, pretrained: str, acc1: float,
                        task: str = "zeroshot_classification") -> Path:
    """One clip_benchmark result file."""
    metrics = {"acc1": acc1, "acc5": min(1.0, acc1 + 0.2), "mean_per_class_recall": acc1 - 0.01}
    if task != "zeroshot_classification":
        metrics = {"image_retrieval_recall@5": acc1, "text_retrieval_recall@5": acc1}
    dump = {"dataset": dataset, "model": model, "pretrained": pretrained, "task": task, "metrics": metrics,
            "language": "en"}
    path = folder / f"{dataset.replace('/', '_')}_{pretrained}_{model}_en_{task}.json"
    with open(path, "w") as f:
        json.dump(dump, f)
    return path


def lmms_eval_run(output: Path, model: str, tasks: dict[str, np.ndarray], metric: str = "exact_match") -> Path:
    """An lmms-eval run of `model` with --log_samples: per task its per-document 0/1 scores."""
    folder = output / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    results = {"results": {t: {"alias": t, f"{metric},none": float(s.mean()),
                               f"{metric}_stderr,none": float(s.std(ddof=1) / np.sqrt(s.size))}
                           for t, s in tasks.items()},
               "group_subtasks": {t: [] for t in tasks}, "configs": {t: {"task": t} for t in tasks},
               "versions": {t: "Yaml" for t in tasks}, "n-shot": {t: 0 for t in tasks},
               "higher_is_better": {t: {metric: True} for t in tasks},
               "n-samples": {t: {"original": s.size, "effective": s.size} for t, s in tasks.items()},
               "config": {"model": "llava", "model_args": f"pretrained={model}"},
               "task_hashes": {}, "model_source": "llava", "model_name": model,
               "model_name_sanitized": model.replace("/", "__")}
    (folder / f"{DATE}_results.json").open("w", encoding="utf-8").write(json.dumps(results, indent=2))
    for task, scores in tasks.items():
        with open(folder / f"{DATE}_samples_{task}.jsonl", "a", encoding="utf-8") as f:
            for doc_id, score in enumerate(scores):
                sample = {"doc_id": doc_id, "target": str("AB"[doc_id % 2]), "filtered_resps": "A",
                          "doc_hash": hashlib.sha256(str(doc_id).encode()).hexdigest(), "input": "question?",
                          metric: float(score)}
                f.write(json.dumps(sample, ensure_ascii=False) + "\n")
    return folder


def vlmevalkit_frame(correct: np.ndarray, categories: list[str]) -> pd.DataFrame:
    """A multiple-choice prediction frame whose predictions are right where `correct`."""
    answers = ["ABCD"[i % 4] for i in range(correct.size)]
    predictions = [a if ok else "ABCD"[("ABCD".index(a) + 1) % 4] for a, ok in zip(answers, correct)]
    return pd.DataFrame({"index": np.arange(correct.size), "question": [f"q{i}" for i in range(correct.size)],
                         "A": "cat", "B": "dog", "C": "cow", "D": "owl", "answer": answers,
                         "category": [categories[i % len(categories)] for i in range(correct.size)],
                         "split": "dev", "prediction": [f"{p}. option" for p in predictions]})


def vlmevalkit_sheet(work_dir: Path, model: str, dataset: str, frame: pd.DataFrame, suffix: str = ".xlsx") -> Path:
    """A prediction sheet under WORK_DIR/MODEL/ as VLMEvalKit dumps it."""
    folder = work_dir / model
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{model}_{dataset}{suffix}"
    if suffix == ".xlsx":
        frame.to_excel(path, index=False)
    else:
        frame.to_csv(path, sep="\t" if suffix == ".tsv" else ",", index=False, encoding="utf-8",
                     quoting=csv.QUOTE_ALL)
    return path


def vlmevalkit_acc(work_dir: Path, model: str, dataset: str, overall: float) -> Path:
    """A `report_acc` frame written as MODEL_DATASET_acc.csv."""
    folder = work_dir / model
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{model}_{dataset}_acc.csv"
    pd.DataFrame({"split": ["none"], "Overall": [overall], "animals": [overall]}).to_csv(
        path, index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    return path
