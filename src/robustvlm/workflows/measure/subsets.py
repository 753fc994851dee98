"""`robustvlm robustness subsets`: per-question results of several models in, a line per subset of
the shifted questions and the held-out worst-subset search out (subsets.json).

Reads any per-question results (`data.results`: lmms-eval samples, VLMEvalKit sheets; one path
per model or a folder). Each model needs its reference accuracy (the `ref` bench's accuracy row)
and its score on every question of the `shift` bench (the same question ids for every model).
The statistics live in `analysis.subset_lines`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robustvlm.analysis.accuracy_on_the_line import Transform
from robustvlm.analysis.subset_lines import SubsetLines, WorstSubset, subset_lines, worst_subset
from robustvlm.data.results import ReadOptions, ResultTable, read_results_file, skips_json
from robustvlm.errors import DataError
from robustvlm.runs import claim_run_folder


@dataclass(frozen=True)
class SubsetReport:
    """What `subsets_from_results` found: the models, the subset lines and the searched subset
    (its question ids)."""

    models: list[str]
    lines: SubsetLines
    worst: WorstSubset
    worst_ids: list[str]


def merged_results(paths: Sequence[str | Path], fmt: str = "auto", options: ReadOptions | None = None) -> ResultTable:
    """The results of every path in one table; DataError when two paths hold one model's
    results on one benchmark (e.g. a work folder and one of its model folders)."""
    merged = ResultTable()
    read_from: dict[tuple[str, str], str | Path] = {}
    for path in paths:
        table = read_results_file(path, fmt, options)
        for row in table.accuracies:
            first = read_from.setdefault((row["model"], row["bench"]), path)
            if first != path:
                raise DataError(f"{row['model']} on {row['bench']} is read twice (also from {first}): give each "
                                "model's results once", str(path))
        merged.accuracies += table.accuracies
        merged.questions += table.questions
        merged.skipped += table.skipped
    return merged


def score_matrix(table: ResultTable, ref: str, shift: str, by: str,
                 source: str) -> tuple[list[str], np.ndarray, np.ndarray, list[str], list[str]]:
    """(models, ID accuracies (m,), shifted scores (m, n), question ids (n,), their `by` labels (n,))."""
    per_model: dict[str, dict[str, dict]] = {}
    for q in table.questions:
        if q["bench"] == shift:
            per_model.setdefault(q["model"], {})[q["id"]] = q
    if not per_model:
        raise DataError(f"no per-question rows for bench {shift!r}", source)
    id_acc = {r["model"]: r["accuracy"] for r in table.accuracies if r["bench"] == ref}
    models = list(per_model)
    missing = [m for m in models if m not in id_acc]
    if missing:
        raise DataError(f"no {ref!r} accuracy for model(s) {missing}", source)
    ids = list(per_model[models[0]])
    for model in models[1:]:
        if set(per_model[model]) != set(ids):
            odd = sorted(set(per_model[model]) ^ set(ids))[0]
            raise DataError(f"models {models[0]!r} and {model!r} do not hold the same {shift!r} questions "
                            f"(e.g. id {odd!r})", source)
    first = per_model[models[0]]
    if any(by not in first[i] for i in ids):
        raise DataError(f"--by {by!r}: the {shift!r} questions have no such column "
                        f"(columns: {', '.join(sorted(first[ids[0]]))})", source)
    scores = np.array([[per_model[m][i]["correct"] for i in ids] for m in models], dtype=float)
    return models, np.array([id_acc[m] for m in models]), scores, ids, [str(first[i][by]) for i in ids]


def subsets_from_results(paths: Sequence[str | Path], *, ref: str, shift: str, out_dir: str | Path, by: str = "env",
                         fmt: str = "auto", fraction: float = 0.25, kind: Transform = "probit", n_boot: int = 1000,
                         seed: int = 0, resume: bool = False, options: ReadOptions | None = None) -> SubsetReport:
    """Subset lines of `shift` against `ref` over the models of `paths`; writes subsets.json (with the
    records the readers left out)."""
    source = ", ".join(str(p) for p in paths)
    table = merged_results(paths, fmt, options)
    models, id_acc, scores, ids, labels = score_matrix(table, ref, shift, by, source)
    lines = subset_lines(id_acc, scores, labels, kind=kind, n_boot=n_boot, seed=seed)
    worst = worst_subset(id_acc, scores, fraction=fraction, kind=kind, seed=seed)
    settings = {"results": [str(Path(p).resolve()) for p in paths], "ref": ref, "shift": shift, "by": by,
                "format": fmt, "fraction": fraction, "transform": kind, "n_boot": n_boot, "seed": seed,
                **({"run": options.run} if options and options.run else {}),
                **({"strict": True} if options and options.strict else {})}
    out = claim_run_folder(out_dir, settings, command="robustness subsets", resume=resume)
    report = SubsetReport(models, lines, worst, [ids[i] for i in worst.questions])
    content = {"ref": ref, "shift": shift, "by": by, "models": models, "questions": len(ids), **lines.to_dict(),
               "worst": {**worst.to_dict(), "questions": report.worst_ids,
                         "search_models": [models[i] for i in worst.search_models],
                         "held_out_models": [models[i] for i in worst.held_out_models]},
               "skipped": skips_json(table.skipped)}
    (out / "subsets.json").write_text(json.dumps(content, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return report
