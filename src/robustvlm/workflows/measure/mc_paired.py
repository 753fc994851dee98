"""`mc eval`'s report: the accuracies of results.csv and, when several models were scored, each
model against the baseline (`--baseline`, else the first model) question by question on every
benchmark (each benchmark is one environment) and over all of them: the paired difference with
its paired bootstrap interval, the exact McNemar test and the power line
(`analysis.paired.compare_paired`), on the same per-question outcomes as the accuracies (with
circular evaluation a question is right only if all its rotations are).

Writes in the mc eval folder: results.json (key "paired": {model: {bench, then "all": figures}},
with "baseline", "circular" and "power_delta"; other keys of an existing results.json are kept)
and report.md / report.html.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robustvlm.analysis.paired import PairedComparison, compare_paired
from robustvlm.errors import ConfigError, DataError
from robustvlm.machine import write_results_json
from robustvlm.model_ref import ModelRef
from robustvlm.report.page import Block, Heading, Paragraph, Table, write_page
from robustvlm.report.paired_table import POWER_NOTE, paired_cells, paired_header, paired_section
from robustvlm.runs import read_jsonl
from robustvlm.workflows.mc_eval import model_slug

ALL = "all"
POWER_DELTA = 0.05


def check_baseline(baseline: ModelRef | None, models: Sequence[ModelRef]) -> None:
    """Refuse a `--baseline` that is not one of the `--model`s (before any scoring)."""
    names = [m.name for m in models]
    if baseline is not None and baseline.name not in names:
        raise ConfigError(f"--baseline {baseline.name!r} is not one of the --model values ({', '.join(names)})")


def question_outcomes(path: Path, *, circular: bool) -> dict[str, float]:
    """{question: 1.0 right / 0.0 wrong} of one per-question file; with `circular` the question
    is its id, right only if every rotation is; else (id, rotation)."""
    outcomes: dict[str, float] = {}
    for row in read_jsonl(path):
        key = str(row["id"]) if circular else f"{row['id']}#{row['rotation']}"
        outcomes[key] = min(outcomes.get(key, 1.0), float(bool(row["correct"])))
    if not outcomes:
        raise DataError(f"{path}: no scored questions")
    return outcomes


def _paired(a: Mapping[str, float], b: Mapping[str, float], where: str, n_boot: int) -> PairedComparison:
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise DataError(f"{where}: the two models' question files hold different questions "
                        f"({len(only)} in only one, e.g. {only[0]!r})")
    keys = list(a)  # the model's file order, as `compare MODEL_FILE BASELINE_FILE` pairs them
    return compare_paired([a[k] for k in keys], [b[k] for k in keys], power_delta=POWER_DELTA, n_boot=n_boot)


def mc_paired(out: Path, models: Sequence[ModelRef], benches: Sequence[str], *, circular: bool,
              baseline: ModelRef | None = None, n_boot: int = 2000) -> dict[str, dict[str, PairedComparison]]:
    """{model name: {bench, then ALL when several: comparison with the baseline}} for every model
    but the baseline, read from the per-question files `out/<model>/<bench>.jsonl`."""
    base = (baseline or models[0]).name
    outcomes = {m: {b: question_outcomes(out / model_slug(m) / f"{b}.jsonl", circular=circular) for b in benches}
                for m in dict.fromkeys(m.name for m in models)}
    result: dict[str, dict[str, PairedComparison]] = {}
    for model in outcomes:
        if model == base:
            continue
        result[model] = {b: _paired(outcomes[model][b], outcomes[base][b], f"{out}, {b}", n_boot) for b in benches}
        if len(benches) > 1:
            ours, theirs = ({f"{b}/{k}": v for b in benches for k, v in outcomes[m][b].items()} for m in (model, base))
            result[model][ALL] = _paired(ours, theirs, f"{out}, all benchmarks", n_boot)
    return result


def _results_table(results_csv: Path) -> Table:
    with results_csv.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return Table(["model", "method", "benchmark", "accuracy", "95% CI (Clopper-Pearson)", "n", "unparsed"],
                 [[r["model"], r["method"], r["bench"], f"{float(r['accuracy']):.4f}",
                   f"[{float(r['ci_lo']):.4f}, {float(r['ci_hi']):.4f}]", r["n"], r["unparsed"]] for r in rows])


def paired_blocks(paired: Mapping[str, Mapping[str, PairedComparison]], baseline: str, circular: bool) -> list[Block]:
    """The report section: one row per (model, benchmark) against the baseline."""
    rows = [[model, bench, *paired_cells(c)] for model, by_bench in paired.items() for bench, c in by_bench.items()]
    unit = "question (right only if every rotation is)" if circular else "question"
    explanation = (f"Each model against the baseline {baseline} on the same questions, per benchmark: the "
                   f"difference in accuracy (model − baseline, per {unit}) with a 95% paired bootstrap interval "
                   "resampling questions and its standard error; the questions only the model / only the "
                   "baseline got right and the exact two-sided McNemar p-value. " + POWER_NOTE)
    header = ["model", "benchmark", *paired_header(POWER_DELTA, "model", "baseline")]
    return paired_section(f"Paired comparison with {baseline}", explanation, header, rows)


def write_mc_report(out: str | Path, models: Sequence[ModelRef], benches: Sequence[str | Path], *, circular: bool,
                    baseline: ModelRef | None = None) -> tuple[Path, Path, Path]:
    """results.json, report.md and report.html of an mc eval folder (see the module docstring);
    results.json names the baseline by its `name`."""
    out = Path(out)
    stems = [Path(b).stem for b in benches]
    base_ref = baseline or models[0]
    base = base_ref.name
    paired = mc_paired(out, models, stems, circular=circular, baseline=base_ref)
    results_json = out / "results.json"
    data: dict[str, Any] = json.loads(results_json.read_text(encoding="utf-8")) if results_json.is_file() else {}
    data.update(baseline=base, circular=circular, power_delta=POWER_DELTA,
                paired={m: {b: c.to_dict() for b, c in by.items()} for m, by in paired.items()})
    write_results_json(out, data)
    blocks: list[Block] = [
        Heading("robustvlm mc eval", 1),
        Paragraph("Accuracy per model and benchmark (results.csv)" + (", circular evaluation." if circular else ".")),
        _results_table(out / "results.csv"),
        *paired_blocks(paired, base, circular),
    ]
    md, html = write_page(blocks, out, title="robustvlm mc eval")
    return results_json, md, html
