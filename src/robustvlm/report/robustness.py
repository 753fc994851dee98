"""Effective-robustness reports: results CSV in, fit.json and scatter.png out (the I/O edge).

The results CSV has one row per (model, benchmark) with the columns
`model, family, bench, accuracy, n` (accuracy a fraction in [0, 1], n the number of questions);
extra columns are ignored. The math lives in `robustvlm.analysis.robustness`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robustvlm.analysis.robustness import (
    LineBand,
    LineFit,
    Transform,
    effective_robustness,
    fit_line,
    inverse_transform,
    line_band,
    transform,
)
from robustvlm.analysis.simulate import simulate
from robustvlm.analysis.stats import clopper_pearson
from robustvlm.errors import DataError
from robustvlm.report.plots import new_figure, percent_axis, save_figure

REQUIRED_COLUMNS = ("model", "family", "bench", "accuracy", "n")
GRID_POINTS = 60


@dataclass(frozen=True)
class ModelPoint:
    """One model's accuracies on the reference and the shifted benchmark (fractions)."""

    model: str
    family: str
    acc_ref: float
    acc_shift: float
    n_ref: int
    n_shift: int


def read_results(path: str | Path) -> list[dict]:
    """Rows of a results CSV as {"model", "family", "bench", "accuracy", "n", "line"}.

    `line` is the 1-based line number in the file where the row ends (the header is line 1).
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(
                    f"missing column(s) {', '.join(missing)}; need {REQUIRED_COLUMNS}", str(path), 1
                )
            rows = [_parse_row(raw, str(path), reader.line_num) for raw in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DataError(f"cannot read results CSV: {err}", str(path)) from err
    if not rows:
        raise DataError("the results CSV has no rows", str(path))
    return rows


def _parse_row(raw: dict, source: str, line: int) -> dict:
    values = {c: (raw.get(c) or "").strip() for c in REQUIRED_COLUMNS}
    empty = [c for c, v in values.items() if not v]
    if empty:
        raise DataError(f"empty value(s) in column(s) {', '.join(empty)}", source, line)
    try:
        accuracy, n = float(values["accuracy"]), int(values["n"])
    except ValueError as err:
        raise DataError(f"accuracy must be a number and n an integer: {err}", source, line) from err
    if not 0.0 <= accuracy <= 1.0:
        raise DataError(f"accuracy must be a fraction in [0, 1], got {accuracy}", source, line)
    if n < 1:
        raise DataError(f"n (number of questions) must be positive, got {n}", source, line)
    return {**values, "accuracy": accuracy, "n": n, "line": line}


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
        points.append(
            ModelPoint(
                model,
                families[model][0],
                seen[ref]["accuracy"],
                seen[shift]["accuracy"],
                seen[ref]["n"],
                seen[shift]["n"],
            )
        )
    return points


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
) -> dict:
    """Fit the baseline line of `shift` vs `ref` accuracy; write fit.json and scatter.png.

    Args:
        results_csv: the results CSV (columns REQUIRED_COLUMNS).
        ref, shift: benchmark names (values of the `bench` column).
        baseline: family whose models define the line; None fits on all models.
        transform: "probit" or "logit".
        out_dir: folder for fit.json and scatter.png (created).
        n_boot, seed: bootstrap of the line band (models resampled).

    Returns:
        The fit.json content: {"ref", "shift", "baseline", "transform", "units", "fit",
        "band", "models": [{"model", "family", "in_fit", "acc_ref", "acc_shift", "n_ref",
        "n_shift", "ci_ref", "ci_shift", "effective_robustness"}]}.
        Accuracies and effective robustness are fractions (x 100 for percentage points).
    """
    source = str(results_csv)
    points = pair_benches(read_results(results_csv), ref, shift, source)
    in_fit = [p for p in points if baseline is None or p.family == baseline]
    if len(in_fit) < 2:
        families = sorted({p.family for p in points})
        raise DataError(
            f"baseline family {baseline!r} has {len(in_fit)} model(s) on both {ref!r} and "
            f"{shift!r}; a line needs at least 2 (families: {families})",
            source,
        )
    x_fit = [p.acc_ref for p in in_fit]
    y_fit = [p.acc_shift for p in in_fit]
    fit = fit_line(x_fit, y_fit, transform=transform)
    band = line_band(
        x_fit,
        y_fit,
        _grid([p.acc_ref for p in points], transform),
        transform=transform,
        n_boot=n_boot,
        seed=seed,
    )
    robustness = effective_robustness(
        [p.acc_ref for p in points], [p.acc_shift for p in points], fit
    )
    models = [
        {
            "model": p.model,
            "family": p.family,
            "in_fit": baseline is None or p.family == baseline,
            "acc_ref": p.acc_ref,
            "acc_shift": p.acc_shift,
            "n_ref": p.n_ref,
            "n_shift": p.n_shift,
            "ci_ref": _accuracy_ci(p.acc_ref, p.n_ref),
            "ci_shift": _accuracy_ci(p.acc_shift, p.n_shift),
            "effective_robustness": float(er),
        }
        for p, er in zip(points, robustness)
    ]
    result = {
        "ref": ref,
        "shift": shift,
        "baseline": baseline,
        "transform": transform,
        "units": "accuracies and effective robustness are fractions (x 100 = percentage points)",
        "fit": fit.to_dict(),
        "band": band.to_dict(),
        "models": models,
    }
    out = Path(out_dir)
    _write_json(out / "fit.json", result)
    fit_label = "all models" if baseline is None else baseline
    scatter(
        models,
        fit,
        band,
        out / "scatter.png",
        title=f"{shift} vs {ref} ({transform} axes)",
        xlabel=f"{ref} accuracy",
        ylabel=f"{shift} accuracy",
        fit_label=f"fit on {fit_label}: slope {fit.slope:.2f}, $R^2$ {fit.r2:.2f}",
    )
    return result


def simulate_to_dir(out_dir: str | Path, *, n_boot: int = 1000, **kwargs) -> dict:
    """Run `analysis.simulate.simulate(**kwargs)`; write simulate.json and simulate.png.

    The scatter shows the accuracies measured on the test sets, coloured by algorithm noise
    xi, with the line fitted on them (and its bootstrap band) and the predicted line.
    """
    result = simulate(**kwargs)
    out = Path(out_dir)
    _write_json(out / "simulate.json", result)
    n_test = result["params"]["n_test"]
    rows = [
        {
            "family": f"ξ = {m['xi']:g}",
            "acc_ref": m["acc_ref_test"],
            "acc_shift": m["acc_shift_test"],
            "ci_ref": _accuracy_ci(m["acc_ref_test"], n_test),
            "ci_shift": _accuracy_ci(m["acc_shift_test"], n_test),
        }
        for m in result["models"]
    ]
    x = [r["acc_ref"] for r in rows]
    y = [r["acc_shift"] for r in rows]
    fit = LineFit(**result["fit_test"])
    band = line_band(x, y, _grid(x, "probit"), n_boot=n_boot, seed=result["params"]["seed"])
    predicted = result["predicted"]
    scatter(
        rows,
        fit,
        band,
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


def _grid(acc_ref: Sequence[float], kind: str) -> np.ndarray:
    """GRID_POINTS reference accuracies spanning the data, evenly spaced in transformed units."""
    z = transform(acc_ref, kind)
    pad = 0.05 * max(float(np.ptp(z)), 0.1)
    return inverse_transform(np.linspace(z.min() - pad, z.max() + pad, GRID_POINTS), kind)


def _write_json(path: Path, content: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def _limits(values: np.ndarray, kind: str) -> tuple[float, float]:
    """Axis limits (fractions) spanning transformed `values` with a 10% margin."""
    z = transform(values, kind)
    pad = 0.1 * max(float(np.ptp(z)), 0.2)
    lo, hi = inverse_transform([z.min() - pad, z.max() + pad], kind)
    return float(lo), float(hi)


def scatter(
    models: Sequence[dict],
    fit: LineFit,
    band: LineBand,
    path: str | Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    fit_label: str,
    reference_line: tuple[float, float, str] | None = None,
) -> Path:
    """Shifted vs reference accuracy on transformed axes with percentage tick labels.

    Draws y = x (dashed), the fitted line with its band, an optional second line
    (slope, intercept, label) in transformed units, and the models coloured by family with
    their confidence intervals as error bars.

    Args:
        models: dicts with "family", "acc_ref", "acc_shift" and the intervals "ci_ref",
            "ci_shift" as (lo, hi) fractions.
    """
    kind = fit.transform
    fig, ax = new_figure(size=(6.5, 5.5))
    acc_x = np.array([m["acc_ref"] for m in models])
    acc_y = np.array([m["acc_shift"] for m in models])
    xlim = _limits(np.concatenate([acc_x, band.grid]), kind)
    ylim = _limits(np.concatenate([acc_y, band.lo, band.hi]), kind)
    zx = transform(np.array(xlim), kind)
    ax.plot(zx, zx, linestyle="--", color="0.5", linewidth=1, label="y = x")
    zgrid = transform(band.grid, kind)
    ax.fill_between(
        zgrid,
        transform(band.lo, kind),
        transform(band.hi, kind),
        color="C0",
        alpha=0.18,
        linewidth=0,
        label=f"{band.level:.0%} bootstrap band",
    )
    ax.plot(zgrid, fit.slope * zgrid + fit.intercept, color="C0", linewidth=1.6, label=fit_label)
    if reference_line is not None:
        slope, intercept, label = reference_line
        ax.plot(
            zgrid, slope * zgrid + intercept, color="k", linestyle=":", linewidth=1.6, label=label
        )
    families = list(dict.fromkeys(m["family"] for m in models))
    for i, family in enumerate(families):
        members = [m for m in models if m["family"] == family]
        _plot_family(ax, members, kind, color=f"C{i + 1}", label=family)
    percent_axis(ax, "x", lambda a: transform(a, kind), xlim, label=xlabel)
    percent_axis(ax, "y", lambda a: transform(a, kind), ylim, label=ylabel)
    ax.grid(alpha=0.25)
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8, loc="upper left")
    return save_figure(fig, path)


def _plot_family(ax, members: Sequence[dict], kind: str, *, color: str, label: str) -> None:
    """Points of one family with their confidence intervals as error bars, transformed."""
    zx, zx_lo, zx_hi = (
        transform([m["acc_ref"] for m in members], kind),
        *(transform([m["ci_ref"][j] for m in members], kind) for j in (0, 1)),
    )
    zy, zy_lo, zy_hi = (
        transform([m["acc_shift"] for m in members], kind),
        *(transform([m["ci_shift"][j] for m in members], kind) for j in (0, 1)),
    )
    ax.errorbar(
        zx,
        zy,
        xerr=[zx - zx_lo, zx_hi - zx],
        yerr=[zy - zy_lo, zy_hi - zy],
        fmt="o",
        color=color,
        markersize=5,
        elinewidth=0.8,
        capsize=0,
        label=label,
    )


def _accuracy_ci(acc: float, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of an accuracy measured on n questions."""
    return clopper_pearson(round(acc * n), n)
