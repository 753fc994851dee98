"""`robustvlm robustness fit | simulate`: results CSV in, fit.json and scatter.png out.

The results are any file `data.results` reads: robustvlm's CSV (one row per (model, benchmark)
with the columns `model, family, bench, accuracy, n`, as `mc eval` writes it), open_clip's
table, clip_benchmark's, lmms-eval's or VLMEvalKit's files. The line fits live in
`analysis.accuracy_on_the_line`, the group lines in `analysis.group_lines`, the scatter plot in
`report.line_scatter`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robustvlm.analysis.accuracy_on_the_line import (
    ModelPoint,
    RobustnessFit,
    Transform,
    fit_robustness,
)
from robustvlm.analysis.simulate import simulate
from robustvlm.data.results import ReadOptions, Skip, fill_counts, read_results_file, skips_json
from robustvlm.data.results.sizes import same_benchmark
from robustvlm.errors import DataError
from robustvlm.report.line_scatter import scatter
from robustvlm.runs import claim_run_folder


def read_results(path: str | Path, fmt: str = "auto") -> list[dict]:
    """The accuracy rows of a results file of any registered format (`data.results`): dicts with
    "model", "family", "bench", "accuracy", "n" (None where the file gives no count), "line"."""
    return read_results_file(path, fmt).accuracies


def load_points(path: str | Path, *, ref: str, shift: str, fmt: str = "auto", group_by: str | None = None,
                n_questions: Mapping[str, int] | None = None,
                options: ReadOptions | None = None) -> tuple[list[ModelPoint], list[Skip]]:
    """(one ModelPoint per model of the results at `path` measured on `ref` and `shift`, the records
    the reader left out); a point's family is the value of column `group_by` (the reader's family
    when None); question counts the file's, else the user's `n_questions`, else the standard
    table's (`data.results.sizes`). A standard set matches across spellings (`--ref "ImageNet 1k"`
    finds clip_benchmark's `imagenet1k`). A benchmark the reader left out, or one whose score is no
    accuracy over counted questions (a row with `measure`), is a DataError saying so."""
    source = str(path)
    table = read_results_file(path, fmt, options)
    rows = [_named(row, (ref, shift)) for row in table.accuracies]
    for bench in (ref, shift):
        _check_accuracy(bench, rows, table.skipped, source)
    fill_counts(rows, (ref, shift), n_questions or {}, source)
    if group_by is not None:
        rows = [_regrouped(row, group_by, source) for row in rows]
    return pair_benches(rows, ref, shift, source), table.skipped


def _check_accuracy(bench: str, rows: Sequence[dict], skipped: Sequence[Skip], source: str) -> None:
    """DataError when `bench` is not an accuracy over counted questions, or was left out."""
    row = next((r for r in rows if r["bench"] == bench), None)
    if row is not None and row.get("measure"):
        raise DataError(f"bench {bench!r} holds {row['measure']}, not an accuracy over a counted set of questions: "
                        "a fit's intervals count questions", source, row["line"])
    left_out = next((s for s in skipped if bench in s.record), None)
    if row is None and left_out is not None:
        raise DataError(f"bench {bench!r} was left out: {left_out.why}", left_out.file, left_out.record)


def _named(row: dict, benches: Sequence[str]) -> dict:
    """The row with its bench spelled as the user spells it, where both name one standard set."""
    match = next((b for b in benches if same_benchmark(row["bench"], b)), row["bench"])
    return row if match == row["bench"] else {**row, "bench": match, "bench_in_file": row["bench"]}


def _regrouped(row: dict, column: str, source: str) -> dict:
    value = str(row.get(column) or "").strip()
    if not value:
        columns = sorted(k for k in row if k not in ("line", "n_from"))
        raise DataError(f"--group-by {column!r}: the record has no such value (columns: {', '.join(columns)})",
                        source, row["line"])
    return {**row, "family": value}


def pair_benches(rows: Sequence[dict], ref: str, shift: str, source: str) -> list[ModelPoint]:
    """One ModelPoint per model that has a row for `ref` or `shift` (it must have both)."""
    benches = sorted({r["bench"] for r in rows})
    for bench in (ref, shift):
        if bench not in benches:
            raise DataError(f"no rows for bench {bench!r}; benches present: {benches}", source)
    by_model: dict[str, dict[str, dict]] = {}
    families: dict[str, tuple[str, int]] = {}
    for r in rows:
        family, first_line = families.setdefault(r["model"], (r["family"], r["line"]))
        if family != r["family"]:
            raise DataError(
                f"model {r['model']!r} is in family {r['family']!r} here but {family!r} on line "
                f"{first_line}",
                source,
                r["line"],
            )
        if r["bench"] not in (ref, shift):
            continue
        seen = by_model.setdefault(r["model"], {})
        if r["bench"] in seen:
            raise DataError(
                f"second row for model {r['model']!r} on bench {r['bench']!r} "
                f"(first on line {seen[r['bench']]['line']})",
                source,
                r["line"],
            )
        seen[r["bench"]] = r
    points = []
    for model, seen in by_model.items():
        for bench in (ref, shift):
            if bench not in seen:
                other = seen[shift if bench == ref else ref]
                raise DataError(
                    f"model {model!r} has no row for bench {bench!r}", source, other["line"]
                )
        a, b = seen[ref], seen[shift]
        points.append(
            ModelPoint(model, families[model][0], a["accuracy"], b["accuracy"], a["n"], b["n"])
        )
    return points


def _write_json(path: Path, content: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def fit_from_results(
    results_csv: str | Path,
    *,
    ref: str,
    shift: str,
    baseline: str | None = None,
    transform: Transform = "probit",
    out_dir: str | Path,
    n_boot: int = 1000,
    seed: int = 0,
    resume: bool = False,
    fmt: str = "auto",
    group_by: str | None = None,
    n_questions: Mapping[str, int] | None = None,
    extra_settings: Mapping[str, object] | None = None,
    options: ReadOptions | None = None,
) -> RobustnessFit:
    """Fit the baseline line of `shift` vs `ref` accuracy; write fit.json and scatter.png.

    Args:
        results_csv: the results CSV (columns REQUIRED_COLUMNS).
        ref, shift: benchmark names (values of the `bench` column).
        baseline: family whose models define the line; None fits on all models.
        transform: "probit" or "logit".
        out_dir: folder for fit.json and scatter.png (created).
        n_boot, seed: bootstrap of the line band (models resampled).
        resume: write into a folder that holds this same fit (it is claimed as every run folder).
        fmt, group_by, n_questions: see `load_points` (with `group_by`, `baseline` names a group).
        extra_settings: more settings recorded in the claimed folder (what else will be written).
        options: how the file is read (`data.results.ReadOptions`); its skipped records go into
            fit.json's `skipped`.
    """
    source = str(results_csv)
    points, skipped = load_points(results_csv, ref=ref, shift=shift, fmt=fmt, group_by=group_by,
                                  n_questions=n_questions, options=options)
    try:
        result = fit_robustness(
            points, ref=ref, shift=shift, baseline=baseline, transform=transform,
            n_boot=n_boot, seed=seed,
        )
    except DataError as err:
        raise DataError(err.message, source) from None
    settings: dict[str, object] = {"results": str(Path(results_csv).resolve()), "ref": ref, "shift": shift,
                                   "baseline": baseline, "transform": transform, "n_boot": n_boot, "seed": seed}
    reading = options or ReadOptions()
    more = {"format": fmt, "group_by": group_by, "n_questions": dict(n_questions or {}), "run": reading.run,
            "strict": reading.strict or None, **(extra_settings or {})}
    settings |= {k: v for k, v in more.items() if v not in (None, "auto", {})}  # as before, when unused
    out = claim_run_folder(out_dir, settings, command="robustness fit", resume=resume)
    _write_json(out / "fit.json", {**result.to_dict(), "skipped": skips_json(skipped)})
    fit = result.fit
    scatter(result.models, fit, result.band, out / "scatter.png", title=f"{shift} vs {ref} ({transform} axes)",
            xlabel=f"{ref} accuracy", ylabel=f"{shift} accuracy",
            fit_label=f"fit on {baseline or 'all models'}: slope {fit.slope:.2f}, $R^2$ {fit.r2:.2f}")
    return result


def simulate_to_dir(out_dir: str | Path, *, n_boot: int = 1000, resume: bool = False, **kwargs: Any) -> dict:
    """Run `analysis.simulate.simulate(**kwargs)`; write simulate.json and simulate.png.

    The scatter shows the accuracies measured on the test sets, coloured by algorithm noise
    xi, with the line fitted on them (and its bootstrap band) and the predicted line.
    Returns the simulate.json content (see `simulate`).
    """
    out = claim_run_folder(out_dir, {"n_boot": n_boot, **kwargs}, command="robustness simulate", resume=resume)
    result = simulate(**kwargs)
    _write_json(out / "simulate.json", result)
    n_test = result["params"]["n_test"]
    points = [
        ModelPoint(f"head {i}", f"ξ = {m['xi']:g}", m["acc_ref_test"], m["acc_shift_test"], n_test, n_test)
        for i, m in enumerate(result["models"])
    ]
    heads = fit_robustness(points, ref="reference", shift="shifted", n_boot=n_boot, seed=result["params"]["seed"])
    fit = heads.fit
    predicted = result["predicted"]
    scatter(
        heads.models,
        fit,
        heads.band,
        out / "simulate.png",
        title="Gaussian location model: heads trained with varying n and ξ",
        xlabel="reference accuracy",
        ylabel="shifted accuracy",
        fit_label=f"fitted: slope {fit.slope:.3f}",
        reference_line=(
            predicted["slope"],
            predicted["intercept"],
            f"predicted: slope {predicted['slope']:.3f}",
        ),
    )
    return result
