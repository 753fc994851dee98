"""Score many models on multiple-choice benchmarks: results.csv plus per-question JSONL, resumable.

Layout of `out_dir`:
- `results.csv`: one row per (model, bench): model, family, bench, accuracy, n, ci_lo, ci_hi
  (95% Clopper-Pearson), unparsed. Rows of earlier runs for other (model, bench) pairs are kept.
- `<model-slug>/<bench-stem>.jsonl`: one line per scored question, appended as it goes:
  id, rotation, answer, prediction (option index, null = unparsed), correct, scores (the K
  option scores: log-likelihoods in nats, cosine similarities, or null for generation), plus
  `response` (generation) or `n_tokens` (log-likelihood).

Models load as `models.backends` families; how a model is scored follows from what its family
supports (`make_scorer`): "vlm" (generative: `method` "loglik" or "generate", see `score`),
"clip" and "siglip" (dual encoders: template-ensemble similarity, see `dual_encoder`; `method`
does not apply). Circular evaluation scores every rotation of each question (a file built with
`circular=True` already holds them) and counts a question right only if all its rotations are.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from robustvlm.analysis.stats import clopper_pearson
from robustvlm.errors import ConfigError, DataError
from robustvlm.jsonl import read_appended_rows
from robustvlm.models.backends import BACKENDS, Backend, infer_family, load_backend
from robustvlm.multiple_choice.build import MCQuestion, circular_correct, read_questions, rotations
from robustvlm.multiple_choice.dual_encoder import DualEncoderScorer
from robustvlm.multiple_choice.score import extract_choice, generate_answers, score_options

METHODS = ("loglik", "generate")
RESULT_COLUMNS = ("model", "family", "bench", "accuracy", "n", "ci_lo", "ci_hi", "unparsed")

ModelSpec = str | Mapping[str, str]
# questions -> one JSONL row (without id/rotation/answer/correct) per question
Scorer = Callable[[list[MCQuestion]], list[dict[str, Any]]]


def model_slug(name: str) -> str:
    """A folder name for a model: "org/model-7b" -> "org_model-7b"."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def _model_spec(spec: ModelSpec) -> tuple[str, str]:
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


def _by_similarity(backend: Backend, normalize: bool) -> Scorer:
    dual = DualEncoderScorer(backend.model, backend.processor)

    def score(questions: list[MCQuestion]) -> list[dict[str, Any]]:
        return [{"prediction": max(range(len(s)), key=s.__getitem__), "scores": s} for s in dual.score(questions)]

    return score


def _by_generation(backend: Backend, normalize: bool) -> Scorer:
    def score(questions: list[MCQuestion]) -> list[dict[str, Any]]:
        replies = generate_answers(backend.model, backend.processor, questions)
        return [{"prediction": extract_choice(r, q.options), "scores": None, "response": r}
                for q, r in zip(questions, replies)]

    return score


def _by_loglik(backend: Backend, normalize: bool) -> Scorer:
    def score(questions: list[MCQuestion]) -> list[dict[str, Any]]:
        rows = []
        for q in questions:
            scores = score_options(backend.model, backend.processor, q)
            rows.append({"prediction": scores.prediction(normalize),
                         "scores": scores.mean if normalize else scores.sum, "n_tokens": scores.n_tokens})
        return rows

    return score


# way of scoring -> (the capabilities it needs, its scorer); `make_scorer` picks one
SCORERS: dict[str, tuple[tuple[str, ...], Callable[[Backend, bool], Scorer]]] = {
    "loglik": (("option_loglik",), _by_loglik),
    "generate": (("generate",), _by_generation),
    "similarity": (("image_embed", "text_embed"), _by_similarity),
}


def make_scorer(backend: Backend, *, method: str, normalize: bool) -> Scorer:
    """The per-batch scoring function of a loaded model: `method` ("loglik" or "generate") when
    its family supports it, else image-text similarity when it embeds both (dual encoders, for
    which `method` does not apply). Raises ConfigError naming what the model supports otherwise."""
    ways = [way for way in (method, "similarity") if backend.supports(*SCORERS[way][0])]
    if not ways:
        backend.require(*SCORERS[method][0])  # raises
    return SCORERS[ways[0]][1](backend, normalize)


# --- per-question JSONL ------------------------------------------------------------------

def _question_key(row: Mapping[str, Any]) -> tuple[str, int]:
    return str(row["id"]), int(row["rotation"])


def _questions(bench: Path, circular: bool) -> list[MCQuestion]:
    questions = read_questions(bench)
    if circular and all(q.rotation == 0 for q in questions):
        questions = [r for q in questions for r in rotations(q)]
    seen: set[tuple[str, int]] = set()
    for q in questions:
        key = (q.id, q.rotation)
        if key in seen:
            raise DataError(f"{bench}: question id {q.id!r} rotation {q.rotation} occurs twice", str(bench), q.id)
        seen.add(key)
    return questions


class _LazyScorer:
    """Loads the model on first use, so a fully resumed model is never loaded."""

    def __init__(self, name: str, family: str, *, method: str, normalize: bool):
        self.name, self.family, self.method, self.normalize = name, family, method, normalize
        self._scorer: Scorer | None = None

    def __call__(self) -> Scorer:
        if self._scorer is None:
            backend = load_backend(self.name, self.family)
            self._scorer = make_scorer(backend, method=self.method, normalize=self.normalize)
        return self._scorer


def score_bench(
    scorer: Callable[[], Scorer], questions: list[MCQuestion], path: Path, *, resume: bool, batch_size: int
) -> list[dict[str, Any]]:
    """Score the questions not yet in `path` (all unless `resume`), appending one line per question;
    returns the rows of all `questions`. `scorer` is called (to load the model) only if work is left."""
    done = {_question_key(r): r for r in read_appended_rows(path)} if resume else {}
    todo = [q for q in questions if (q.id, q.rotation) not in done]
    path.parent.mkdir(parents=True, exist_ok=True)
    if todo:
        score = scorer()
        with path.open("a" if resume else "w", encoding="utf-8") as f:
            for start in tqdm(range(0, len(todo), batch_size), desc=path.stem, unit="batch"):
                batch = todo[start : start + batch_size]
                for q, result in zip(batch, score(batch)):
                    row = {"id": q.id, "rotation": q.rotation, "answer": q.answer, **result}
                    row["correct"] = row["prediction"] == q.answer
                    done[(q.id, q.rotation)] = row
                    f.write(json.dumps(row) + "\n")
                f.flush()
    elif not resume:
        path.write_text("", encoding="utf-8")
    return [done[(q.id, q.rotation)] for q in questions]


def summarize(rows: Sequence[Mapping[str, Any]], *, circular: bool) -> dict[str, Any]:
    """accuracy, n, Clopper-Pearson ci_lo / ci_hi and the unparsed count of scored rows
    (circular: n counts question ids, each right only if all its rotations are)."""
    if circular:
        by_id: dict[str, list[bool]] = {}
        for r in rows:
            by_id.setdefault(str(r["id"]), []).append(bool(r["correct"]))
        outcomes = [circular_correct(v) for v in by_id.values()]
    else:
        outcomes = [bool(r["correct"]) for r in rows]
    if not outcomes:
        raise DataError("no scored questions to summarize")
    k, n = sum(outcomes), len(outcomes)
    lo, hi = clopper_pearson(k, n)
    unparsed = sum(r["prediction"] is None for r in rows)
    return {"accuracy": k / n, "n": n, "ci_lo": lo, "ci_hi": hi, "unparsed": unparsed}


def _write_results(path: Path, rows: list[dict[str, Any]]) -> None:
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
) -> Path:
    """Score every model on every benchmark (question JSONL files from `write_questions`).

    Args:
        models: hub names / local folders / "tiny:..." names, or {"name", "family"} dicts
            (family "vlm", "clip" or "siglip"; inferred from the config when not given).
        benches: question files; their stems name them in the outputs and must differ.
        out_dir: output folder (see the module docstring).
        method: generative VLMs only: "loglik" (option log-likelihood) or "generate".
        circular: score all rotations; a question counts only if all are right.
        resume: keep rows already in the per-question JSONL and score only the missing questions.
        batch_size: questions per scoring call (generation and dual encoders batch them;
            log-likelihood runs one question, K options, at a time).
        normalize: log-likelihood prediction by the per-token mean (True) or the sum.

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
    specs = [_model_spec(m) for m in models]
    if not specs:
        raise ConfigError("need at least one model")
    out = Path(out_dir)
    question_sets = {p.stem: _questions(p, circular) for p in paths}
    results = []
    for name, family in specs:
        scorer = _LazyScorer(name, family, method=method, normalize=normalize)
        for bench, questions in question_sets.items():
            jsonl = out / model_slug(name) / f"{bench}.jsonl"
            rows = score_bench(scorer, questions, jsonl, resume=resume, batch_size=batch_size)
            results.append({"model": name, "family": family, "bench": bench, **summarize(rows, circular=circular)})
    out.mkdir(parents=True, exist_ok=True)
    _write_results(out / "results.csv", results)
    return out / "results.csv"
