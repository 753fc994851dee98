"""`robustvlm mc eval`: score many models on multiple-choice benchmarks; results.csv with CIs.

Layout of `out_dir`:
- `config.resolved.yaml`: the scoring settings (method, circular, normalize). `--resume` needs
  them to match; models, benchmarks and the batch size may change, so a resumed run can add
  models or benchmarks to the same results.csv. A folder scored by log-likelihood is never
  resumed with generation: the error names `method`.
- `results.csv`: one row per (model, bench): model, family, method (how it was scored: loglik,
  generate or similarity), bench, accuracy, n, ci_lo, ci_hi (95% Clopper-Pearson), unparsed.
  Rows of earlier runs for other (model, bench) pairs are kept.
- `<model-slug>/usage.json`: a served model's requests sent, cache hits and tokens.
- `<model-slug>/<bench-stem>.jsonl`: one line per scored question, appended as it goes: id,
  rotation, answer, prediction (option index, null = unparsed), correct, scores, plus `response`
  (generation) or `n_tokens` (log-likelihood); see `multiple_choice.scoring`.

Circular evaluation scores every rotation of each question and counts a question right only if
all its rotations are.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from robustvlm.analysis.accuracy import accuracy_summary
from robustvlm.config import ServedConfig
from robustvlm.errors import ConfigError, DataError
from robustvlm.models.backends import BACKENDS, infer_family, load_backend, served_settings
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.generative import GENERATE_MAX_NEW_TOKENS
from robustvlm.multiple_choice.scoring import (
    METHODS,
    Scorer,
    load_bench,
    make_scorer,
    scoring_method,
)
from robustvlm.multiple_choice.stability import accuracy_vs_size
from robustvlm.runs import (
    append_jsonl,
    claim_run_folder,
    read_input_jsonl,
    read_jsonl,
    usage_recorder,
)

RESULT_COLUMNS = ("model", "family", "method", "bench", "accuracy", "n", "ci_lo", "ci_hi", "unparsed")

ModelSpec = str | Mapping[str, str]


def model_slug(name: str) -> str:
    """A folder name for a model: "org/model-7b" -> "org_model-7b"."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def model_spec(spec: ModelSpec) -> tuple[str, str]:
    """(name, family) of a model given as a name or {"name": ..., "family": ...}."""
    if isinstance(spec, str):
        return spec, infer_family(spec)
    unknown = set(spec) - {"name", "family"}
    if "name" not in spec or unknown:
        raise ConfigError(f"a model is a name or {{'name', 'family'}}, got {dict(spec)}")
    family = spec.get("family") or infer_family(spec["name"])
    if family not in BACKENDS:
        raise ConfigError(f"model '{spec['name']}': family must be one of {list(BACKENDS)}, got '{family}'")
    return spec["name"], family


class _LazyScorer:
    """Loads the model on first use, so a fully resumed model is never loaded."""

    def __init__(self, name: str, family: str, *, way: str, normalize: bool, decoding: Mapping[str, Any],
                 served: ServedConfig | None, usage_folder: Path):
        self.name, self.family, self.way, self.normalize, self.served = name, family, way, normalize, served
        self.decoding, self.usage_folder = decoding, usage_folder
        self._scorer: Scorer | None = None

    def __call__(self) -> Scorer:
        if self._scorer is None:
            backend = load_backend(self.name, self.family, served=self.served)
            backend.track_usage(usage_recorder(self.usage_folder))
            self._scorer = make_scorer(backend, way=self.way, normalize=self.normalize, **self.decoding)
        return self._scorer


def _question_key(row: Mapping[str, Any]) -> tuple[str, int]:
    return str(row["id"]), int(row["rotation"])


def score_bench(
    scorer: Callable[[], Scorer], questions: list[MCQuestion], path: Path, *, resume: bool, batch_size: int
) -> list[dict[str, Any]]:
    """Score the questions not yet in `path` (all unless `resume`), appending one line per question;
    returns the rows of all `questions`. `scorer` is called (to load the model) only if work is left."""
    done = {_question_key(r): r for r in read_jsonl(path)} if resume else {}
    todo = [q for q in questions if (q.id, q.rotation) not in done]
    path.parent.mkdir(parents=True, exist_ok=True)
    if not todo:
        if not resume:
            path.write_text("", encoding="utf-8")
        return [done[(q.id, q.rotation)] for q in questions]
    score = scorer()
    with path.open("a" if resume else "w", encoding="utf-8") as log:
        for start in tqdm(range(0, len(todo), batch_size), desc=path.stem, unit="batch"):
            batch = todo[start : start + batch_size]
            rows = []
            for q, result in zip(batch, score(batch)):
                row = {"id": q.id, "rotation": q.rotation, "answer": q.answer, **result}
                row["correct"] = row["prediction"] == q.answer
                done[(q.id, q.rotation)] = row
                rows.append(row)
            append_jsonl(log, rows)
    return [done[(q.id, q.rotation)] for q in questions]


def write_results(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write results.csv: earlier rows of other (model, bench) pairs kept, these replacing theirs."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    if path.exists():
        with path.open(newline="", encoding="utf-8") as f:
            for old in csv.DictReader(f):
                merged[(old["model"], old["bench"])] = old
    for row in rows:
        merged[(row["model"], row["bench"])] = row
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=RESULT_COLUMNS)
        writer.writeheader()
        writer.writerows(merged.values())


def evaluate_models(
    models: Sequence[ModelSpec],
    benches: Sequence[str | Path],
    out_dir: str | Path,
    *,
    method: str = "loglik",
    circular: bool = False,
    resume: bool = False,
    batch_size: int = 8,
    normalize: bool = True,
    max_new_tokens: int = GENERATE_MAX_NEW_TOKENS,
    repetition_penalty: float = 1.0,
    served: ServedConfig | None = None,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
) -> Path:
    """Score every model on every benchmark (question JSONL files from `write_questions`).

    Args:
        models: hub names / local folders / "tiny:..." names, or {"name", "family"} dicts
            (a `models.backends` family; inferred from the config when not given).
        benches: question files; their stems name them in the outputs and must differ.
        out_dir: output folder (see the module docstring).
        method: generative VLMs only: "loglik" (option log-likelihood) or "generate".
        circular: score all rotations; a question counts only if all are right.
        resume: keep rows already in the per-question JSONL and score only the missing questions.
        batch_size: questions per scoring call (generation and dual encoders batch them;
            log-likelihood runs one question, K options, at a time).
        normalize: log-likelihood prediction by the per-token mean (True) or the sum.
        max_new_tokens, repetition_penalty: greedy decoding of method "generate" (1.0: no
            penalty), the same for a local and a served model; other values are refused with
            "loglik".
        served: the server of the "openai:MODEL" models (their usage.json goes in their folder).
        image_root, allow_outside_root: where image paths of the benchmarks may point
            (`multiple_choice.build.read_questions`).

    Returns:
        the path of results.csv.
    """
    if method not in METHODS:
        raise ConfigError(f"method must be one of {METHODS}, got '{method}'")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    paths = [Path(b) for b in benches]
    stems = [p.stem for p in paths]
    if not paths or len(set(stems)) != len(stems):
        raise ConfigError(f"need at least one benchmark, with distinct file names, got {[str(p) for p in paths]}")
    specs = [model_spec(m) for m in models]
    if not specs:
        raise ConfigError("need at least one model")
    decoding = {"max_new_tokens": max_new_tokens, "repetition_penalty": repetition_penalty}
    if method != "generate" and (max_new_tokens, repetition_penalty) != (GENERATE_MAX_NEW_TOKENS, 1.0):
        raise ConfigError("--max-new-tokens and --repetition-penalty apply to --method generate")
    settings = {"method": method, "circular": circular, "normalize": normalize, "batch_size": batch_size,
                **({"decoding": decoding} if method == "generate" else {}),
                "models": [f"{name} ({family})" for name, family in specs], "benches": [str(p) for p in paths],
                **served_settings([name for name, _ in specs], served)}
    question_sets = {p.stem: load_bench(p, circular, image_root=image_root, allow_outside_root=allow_outside_root)
                     for p in paths}  # checked before the claim
    out = claim_run_folder(out_dir, settings, command="mc eval", resume=resume, may_differ=("models", "benches", "batch_size", "server"))
    results = []
    for name, family in specs:
        way = scoring_method(family, method)
        scorer = _LazyScorer(name, family, way=way, normalize=normalize, decoding=decoding, served=served,
                             usage_folder=out / model_slug(name))
        for bench, questions in question_sets.items():
            jsonl = out / model_slug(name) / f"{bench}.jsonl"
            rows = score_bench(scorer, questions, jsonl, resume=resume, batch_size=batch_size)
            summary = accuracy_summary(rows, circular=circular).to_dict()
            results.append({"model": name, "family": family, "method": way, "bench": bench, **summary})
    write_results(out / "results.csv", results)
    return out / "results.csv"


def stability_rows(predictions: str | Path, *, draws: int = 50, seed: int = 0) -> list[dict]:
    """Accuracy against the number of sampled questions (`multiple_choice.stability`) from a
    per-question JSONL written by `evaluate_models`; an empty file or a row without `correct` is a
    DataError."""
    rows = read_input_jsonl(predictions, "predictions file")
    if not rows:
        raise DataError("holds no per-question rows (the file is empty)", str(predictions))
    for line, row in rows:
        if "correct" not in row:
            raise DataError("not a per-question row with a 'correct' field", str(predictions), line)
    return accuracy_vs_size([bool(r["correct"]) for _, r in rows], n_draws=draws, seed=seed)
