"""`robustvlm embed eval`: embedding models as zero-shot classifiers and as retrievers.

Multiple choice: every benchmark is scored by `mc eval`'s machinery (`workflows.mc_eval`), the
embedding family choosing similarity scoring (image + question against class-name templates),
so the rows land in the same `results.csv` (family `vlm2vec-vqa`, `vlm2vec-caption`, ...) that
`robustness fit` and the probit plots read, beside VLMs and dual encoders.

Retrieval (`--retrieval DATA`): recall@1 and @5 image -> text and text -> image on the records
of one split (`embeddings.retrieval`), in `OUT/retrieval/retrieval.csv` (model, family,
direction, k, recall, hits, n, ci_lo, ci_hi; 95% Clopper-Pearson). A resumed run keeps the rows
of models already there.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from robustvlm.data.loaders import load_examples
from robustvlm.embeddings.retrieval import retrieval_recalls, retrieval_scores
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import BACKENDS, load_backend
from robustvlm.runs import claim_run_folder
from robustvlm.sharding import helpers_stop_here, sharded
from robustvlm.workflows.mc_eval import ModelSpec, evaluate_models, model_spec

RETRIEVAL_COLUMNS = ("model", "family", "direction", "k", "recall", "hits", "n", "ci_lo", "ci_hi")
EMBEDS = ("image_embed", "text_embed")


@dataclass(frozen=True)
class EmbedEvalResult:
    """Where the results went (None for a part not asked for)."""

    results_csv: Path | None
    retrieval_csv: Path | None


def _read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def evaluate_retrieval(
    models: Sequence[tuple[ModelRef, str]],
    data: str | Path,
    out_dir: str | Path,
    *,
    split: str = "test",
    resume: bool = False,
    batch_size: int = 16,
    allow_outside_root: bool = False,
) -> Path:
    """recall@1/5 of each (name, family) on the `split` records of `data` (read, and checked,
    before the folder is claimed); returns retrieval.csv."""
    loaded = load_examples(data, allow_outside_root=allow_outside_root, verbose=False)
    examples = [ex for ex in loaded if ex.split == split]
    if not examples:
        raise ConfigError(f"{data}: no records in split {split!r} to retrieve")
    settings = {"data": str(data), "split": split, "models": [f"{m.name} ({f})" for m, f in models],
                "batch_size": batch_size}
    out = claim_run_folder(out_dir, settings, command="embed eval", resume=resume, may_differ=("models", "batch_size"))
    path = out / "retrieval.csv"
    rows = _read_rows(path) if resume else []
    done = {r["model"] for r in rows}
    for model, family in models:
        if model.name in done:
            continue
        backend = load_backend(model, family)
        recalls = retrieval_recalls(retrieval_scores(backend, examples, batch_size=batch_size))
        rows += [{"model": model.name, "family": family, "direction": direction, **r.to_dict()}
                 for direction, found in recalls.items() for r in found]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=RETRIEVAL_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def embed_eval(
    models: Sequence[ModelRef | ModelSpec],
    out_dir: str | Path,
    *,
    benches: Sequence[str | Path] = (),
    retrieval: str | Path | None = None,
    retrieval_split: str = "test",
    resume: bool = False,
    batch_size: int = 16,
    allow_outside_root: bool = False,
) -> EmbedEvalResult:
    """Score embedding models on multiple-choice benchmarks and/or a retrieval split.

    Args:
        models: folders from `embed train` (their family is read from embedding.json) or hub
            names, alone or as a ModelSpec with its family; every family must embed images and texts.
        out_dir: results.csv and per-question JSONL (see `workflows.mc_eval`); retrieval/.
        benches: question files (`mc build`).
        retrieval: a dataset whose `retrieval_split` records are image-text pairs.
        allow_outside_root: accept retrieval image paths outside the data file's folder, and
            benchmark image paths outside the benchmark's folder.

    Under a launcher the benchmarks' questions are scored data-parallel (`sharding`); the
    retrieval, which ranks every record against every other, by the main process alone. `--shard`
    applies to the benchmarks only.
    """
    if not benches and retrieval is None:
        raise ConfigError("embed eval needs --benchmark and/or --retrieval")
    if retrieval is not None and sharded():
        raise ConfigError("--shard splits --benchmark questions; --retrieval ranks every record against every "
                          "other at once: run it in its own `embed eval` without --shard")
    specs = [model_spec(m) for m in models]
    for ref, family in specs:
        if not set(EMBEDS) <= BACKENDS[family].capabilities:
            raise ConfigError(f"model '{ref.name}' (family '{family}') does not embed images and texts; "
                              f"give an embedding family, e.g. {{name: ..., family: vlm2vec-vqa}}")
    resolved = [ModelSpec(ref, family) for ref, family in specs]
    results = (evaluate_models(resolved, benches, out_dir, resume=resume, batch_size=batch_size,
                               allow_outside_root=allow_outside_root) if benches else None)
    helpers_stop_here()  # retrieval ranks all records at once: the main process of a launch alone
    retrieved = None
    if retrieval is not None:
        retrieved = evaluate_retrieval(specs, retrieval, Path(out_dir) / "retrieval", split=retrieval_split,
                                       resume=resume, batch_size=batch_size,
                                       allow_outside_root=allow_outside_root)
    return EmbedEvalResult(results, retrieved)
