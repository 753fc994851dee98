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
- with `blind`: `blind/`, the same files for every model scored with the image removed
  (`models.blind`; its config.resolved.yaml adds `blind: true`), and vision_gain.csv / .json /
  .md / .html: with-image minus blind accuracy per (model, bench, environment) with a paired
  bootstrap interval (`report.vision_gain`), for the models and benches of this call. A finished
  run gets its blind half by running again with `--blind --resume`.
- `results.json`, `report.md`, `report.html` (the `mc eval` command): accuracies and each model
  against the baseline question by question (`workflows.measure.mc_paired`).

Circular evaluation scores every rotation of each question and counts a question right only if
all its rotations are.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from robustvlm.analysis.accuracy import accuracy_summary, circular_correct
from robustvlm.analysis.vision_gain import vision_gain
from robustvlm.config import ServedConfig
from robustvlm.errors import ConfigError, DataError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import BACKENDS, Backend, infer_family, load_backend, served_settings
from robustvlm.models.blind import BlindBackend, blind_input
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
from robustvlm.report.vision_gain import GainSection, write_vision_gain
from robustvlm.runs import read_input_jsonl, usage_recorder
from robustvlm.sharding import claim, helpers_stop_here, score_rows

BLIND_FOLDER = "blind"  # a blind run's own folder inside the run's
RESULT_COLUMNS = ("model", "family", "method", "bench", "accuracy", "n", "ci_lo", "ci_hi", "unparsed")

@dataclass(frozen=True)
class ModelSpec:
    """A model to score and its family (a `models.backends` family; None: inferred from the model)."""

    ref: ModelRef
    family: str | None = None


def model_slug(name: str) -> str:
    """A folder name for a model: "org/model-7b" -> "org_model-7b"."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def model_spec(spec: ModelRef | ModelSpec) -> tuple[ModelRef, str]:
    """(reference, family) of a model given alone or as a ModelSpec."""
    if isinstance(spec, ModelRef):
        return spec, infer_family(spec)
    family = spec.family or infer_family(spec.ref)
    if family not in BACKENDS:
        raise ConfigError(f"model '{spec.ref.name}': family must be one of {list(BACKENDS)}, got '{family}'")
    return spec.ref, family


class _LazyBackend:
    """Loads the model on first use, so a fully resumed model is never loaded; the normal and the
    blind scorer of a model share it."""

    def __init__(self, ref: ModelRef, family: str, served: ServedConfig | None, usage_folder: Path):
        self.ref, self.family, self.served, self.usage_folder = ref, family, served, usage_folder
        self._backend: Backend | None = None

    def __call__(self) -> Backend:
        if self._backend is None:
            self._backend = load_backend(self.ref, self.family, served=self.served)
            self._backend.track_usage(usage_recorder(self.usage_folder))
        return self._backend


class _LazyScorer:
    """Makes the scorer on first use (of the blind backend with `blind`, `models.blind`)."""

    def __init__(self, backend: Callable[[], Backend], *, way: str, normalize: bool, decoding: Mapping[str, Any],
                 blind: bool = False):
        self.backend, self.way, self.normalize, self.decoding, self.blind = backend, way, normalize, decoding, blind
        self._scorer: Scorer | None = None

    def __call__(self) -> Scorer:
        if self._scorer is None:
            backend = self.backend()
            self._scorer = make_scorer(BlindBackend(backend) if self.blind else backend, way=self.way,
                                       normalize=self.normalize, **self.decoding)
        return self._scorer


def _question_key(row: Mapping[str, Any]) -> tuple[str, int]:
    return str(row["id"]), int(row["rotation"])


def score_bench(
    scorer: Callable[[], Scorer], questions: list[MCQuestion], path: Path, *, resume: bool, batch_size: int
) -> list[dict[str, Any]]:
    """Score the questions not yet in `path` (all unless `resume`), appending one line per question;
    returns the rows of all `questions` (of this run's `--shard` block; under a launcher each
    process scores a share: `sharding.score_rows`). `scorer` is called (to load the model) only if
    work is left."""

    def batches(todo: list[MCQuestion]) -> Iterator[list[dict[str, Any]]]:
        score = scorer()
        for start in tqdm(range(0, len(todo), batch_size), desc=path.stem, unit="batch"):
            batch = todo[start : start + batch_size]
            rows = []
            for q, result in zip(batch, score(batch)):
                row = {"id": q.id, "rotation": q.rotation, "answer": q.answer, **result}
                row["correct"] = row["prediction"] == q.answer
                rows.append(row)
            yield rows

    return score_rows(path, questions, key=lambda q: (q.id, q.rotation), row_key=_question_key, score=batches,
                      resume=resume)


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


MAY_DIFFER = ("models", "benches", "batch_size", "server")


def evaluate_models(
    models: Sequence[ModelRef | ModelSpec],
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
    blind: bool = False,
) -> Path:
    """Score every model on every benchmark (question JSONL files from `write_questions`).

    Args:
        models: hub names / local folders / "tiny:..." names, alone or as a ModelSpec with its
            family (a `models.backends` family; inferred from the config when not given).
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
        blind: also score every model blind (`models.blind`) into `out_dir/blind/` (the same
            layout) and write the vision gain per environment (`report.vision_gain`).

    Returns:
        the path of results.csv.
    """
    paths, specs, decoding = _check_run(models, benches, method, batch_size, max_new_tokens, repetition_penalty)
    options = _Options(method, circular, normalize, decoding, batch_size, resume, served)
    question_sets = {p.stem: load_bench(p, circular, image_root=image_root, allow_outside_root=allow_outside_root)
                     for p in paths}  # checked before the claim
    folders = _claim_folders(out_dir, _settings(options, specs, paths), resume=resume, blind=blind)
    results: dict[str, list[dict[str, Any]]] = {run: [] for run in folders}
    sections: list[GainSection] = []
    for ref, family in specs:
        scored, gains = _score_model(ref, family, question_sets, folders, options)
        for run, rows in scored.items():
            results[run] += rows
        sections += gains
    helpers_stop_here()  # the other processes of a launch are done: the main one writes the summaries
    for run, folder in folders.items():
        write_results(folder / "results.csv", results[run])
    if blind:
        write_vision_gain(sections, folders["normal"], title="robustvlm mc eval: vision gain")
    return folders["normal"] / "results.csv"


def _claim_folders(out_dir: str | Path, settings: Mapping[str, Any], *, resume: bool, blind: bool) -> dict[str, Path]:
    """{"normal": the run folder, "blind": its blind/ folder (with `blind`)}, claimed."""
    out = claim(out_dir, settings, command="mc eval", resume=resume, may_differ=MAY_DIFFER)
    if not blind:
        return {"normal": out}
    blind_out = claim(out / BLIND_FOLDER, {**settings, "blind": True}, command="mc eval --blind",
                                 resume=resume, may_differ=MAY_DIFFER)
    return {"normal": out, "blind": blind_out}


@dataclass(frozen=True)
class _Options:
    """The scoring settings of one `evaluate_models` call."""

    method: str
    circular: bool
    normalize: bool
    decoding: Mapping[str, Any]
    batch_size: int
    resume: bool
    served: ServedConfig | None


def _settings(options: _Options, specs: Sequence[tuple[ModelRef, str]], paths: Sequence[Path]) -> dict[str, Any]:
    """What config.resolved.yaml records of a run (`--resume` compares it, MAY_DIFFER aside)."""
    return {"method": options.method, "circular": options.circular, "normalize": options.normalize,
            "batch_size": options.batch_size, **({"decoding": options.decoding} if options.method == "generate" else {}),
            "models": [f"{ref.name} ({family})" for ref, family in specs], "benches": [str(p) for p in paths],
            **served_settings([ref for ref, _ in specs], options.served)}


def _score_model(
    model: ModelRef, family: str, question_sets: Mapping[str, list[MCQuestion]], folders: Mapping[str, Path],
    options: _Options,
) -> tuple[dict[str, list[dict[str, Any]]], list[GainSection]]:
    """Score one model on every benchmark in every run of `folders` ("normal", and "blind" when
    asked): ({run: results.csv rows}, the vision gain sections when blind)."""
    way = scoring_method(family, options.method)
    name = model.name
    load = _LazyBackend(model, family, options.served, folders["normal"] / model_slug(name))
    scorers = {run: _LazyScorer(load, way=way, normalize=options.normalize, decoding=options.decoding,
                                blind=run == "blind") for run in folders}
    results: dict[str, list[dict[str, Any]]] = {run: [] for run in folders}
    sections = []
    for bench, questions in question_sets.items():
        labels = {"model": name, "family": family, "method": way, "bench": bench}
        rows = {run: score_bench(scorers[run], questions, folder / model_slug(name) / f"{bench}.jsonl",
                                 resume=options.resume, batch_size=options.batch_size)
                for run, folder in folders.items()}
        for run, scored in rows.items():
            results[run].append({**labels, **accuracy_summary(scored, circular=options.circular).to_dict()})
        if "blind" in rows:
            sections.append(mc_gain_section(labels, questions, rows["normal"], rows["blind"],
                                            circular=options.circular))
    return results, sections


def _check_run(
    models: Sequence[ModelRef | ModelSpec], benches: Sequence[str | Path], method: str, batch_size: int,
    max_new_tokens: int, repetition_penalty: float,
) -> tuple[list[Path], list[tuple[ModelRef, str]], dict[str, Any]]:
    """(benchmark paths, (reference, family) of each model, the decoding settings) of `evaluate_models`'
    arguments, or ConfigError."""
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
    if method != "generate" and (max_new_tokens, repetition_penalty) != (GENERATE_MAX_NEW_TOKENS, 1.0):
        raise ConfigError("--max-new-tokens and --repetition-penalty apply to --method generate")
    return paths, specs, {"max_new_tokens": max_new_tokens, "repetition_penalty": repetition_penalty}


def question_outcomes(rows: Sequence[Mapping[str, Any]], *, circular: bool) -> tuple[dict, dict]:
    """(key -> 1.0 right / 0.0 wrong, key -> cluster) of scored question rows, as
    `accuracy_summary` counts them: with `circular` one key per question id (right only if all
    its rotations are), else one per (id, rotation), clustered by id."""
    if circular:
        by_id: dict[str, list[bool]] = {}
        for r in rows:
            by_id.setdefault(str(r["id"]), []).append(bool(r["correct"]))
        return {i: float(circular_correct(v)) for i, v in by_id.items()}, {i: i for i in by_id}
    outcomes = {(str(r["id"]), int(r["rotation"])): float(bool(r["correct"])) for r in rows}
    return outcomes, {key: key[0] for key in outcomes}


def mc_gain_section(
    labels: Mapping[str, str], questions: Sequence[MCQuestion], normal: Sequence[Mapping[str, Any]],
    blind: Sequence[Mapping[str, Any]], *, circular: bool,
) -> GainSection:
    """The vision gain of one model on one benchmark, per environment (question `source`)."""
    env_of = {q.id: q.source for q in questions}
    with_image, clusters = question_outcomes(normal, circular=circular)
    without, _ = question_outcomes(blind, circular=circular)
    envs = {key: env_of[key if circular else key[0]] for key in with_image}
    rows = vision_gain(with_image, without, envs, clusters=None if circular else clusters)
    return GainSection(labels, blind_input(labels["family"]), rows)


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
