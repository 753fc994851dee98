"""Probit/logit lines and effective robustness vs scipy, enumeration and hand computation;
the report edge (results CSV -> fit.json + scatter.png) and the shared plot helpers."""

from __future__ import annotations

import csv
import itertools
import json

import numpy as np
import pytest
from matplotlib.figure import Figure
from scipy import special
from scipy import stats as sps

from robustvlm.analysis.robustness import (
    CLIP_EPS,
    effective_robustness,
    fit_line,
    inverse_transform,
    line_band,
    transform,
)
from robustvlm.errors import DataError
from robustvlm.report.plots import bar_with_ci, percent_axis, plot_series
from robustvlm.workflows.robustness import fit_from_results, simulate_to_dir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- transforms


def test_transforms_match_scipy_and_invert():
    acc = np.array([0.03, 0.2, 0.5, 0.77, 0.999])
    np.testing.assert_allclose(transform(acc, "probit"), sps.norm.ppf(acc))
    np.testing.assert_allclose(transform(acc, "logit"), np.log(acc / (1 - acc)))
    for kind in ("probit", "logit"):
        np.testing.assert_allclose(inverse_transform(transform(acc, kind), kind), acc)


def test_transforms_clip_zero_and_one_to_finite_values():
    ends = transform([0.0, 1.0], "probit")
    np.testing.assert_allclose(ends, [sps.norm.ppf(CLIP_EPS), -sps.norm.ppf(CLIP_EPS)])
    np.testing.assert_allclose(transform([0.0], "logit"), [special.logit(CLIP_EPS)])


@pytest.mark.parametrize(
    ("acc", "kind"), [([0.5, 1.2], "probit"), ([np.nan], "probit"), ([0.5], "arcsin")]
)
def test_transforms_reject_bad_input(acc, kind):
    with pytest.raises(DataError):
        transform(acc, kind)


# ---------------------------------------------------------------- line fits


@pytest.mark.parametrize("kind", ["probit", "logit"])
def test_fit_line_matches_linregress_in_transformed_space(kind):
    rng = np.random.default_rng(4)
    acc_ref = rng.uniform(0.4, 0.97, size=15)
    acc_shift = np.clip(acc_ref - rng.uniform(0.05, 0.3, size=15), 0.01, 1)
    fit = fit_line(acc_ref, acc_shift, transform=kind)
    ref = sps.linregress(transform(acc_ref, kind), transform(acc_shift, kind))
    assert fit.slope == pytest.approx(ref.slope)
    assert fit.intercept == pytest.approx(ref.intercept)
    assert fit.r2 == pytest.approx(ref.rvalue**2)
    assert (fit.n, fit.transform) == (15, kind)


def test_hand_example_line_and_effective_robustness():
    # three baseline models exactly on probit(shift) = 0.5 * probit(ref) - 0.3
    z_ref = np.array([0.0, 1.0, 2.0])  # accuracies 50%, 84.13%, 97.72%
    fit = fit_line(sps.norm.cdf(z_ref), sps.norm.cdf(0.5 * z_ref - 0.3))
    assert (fit.slope, fit.intercept, fit.r2) == pytest.approx((0.5, -0.3, 1.0))
    # a model at 50% reference accuracy is expected at Phi(-0.3) = 38.21% on the shift;
    # scoring 45% it is 6.79 points above the line.
    er = effective_robustness([0.5], [0.45], fit)
    assert er[0] == pytest.approx(0.45 - 0.382088578, abs=1e-9)


def test_logit_effective_robustness_by_hand():
    # logit(shift) = logit(ref) - 1: at ref = 50% the line predicts 1 / (1 + e) = 26.89%
    ref = np.array([0.5, 0.8, 0.9])
    shift = special.expit(special.logit(ref) - 1)
    fit = fit_line(ref, shift, transform="logit")
    assert effective_robustness([0.5], [0.30], fit)[0] == pytest.approx(0.30 - 1 / (1 + np.e))


@pytest.mark.parametrize(
    ("ref", "shift", "match"),
    [
        ([0.7], [0.6], "at least two"),
        ([0.7, 0.7], [0.6, 0.5], "at least two"),
        ([0.7, 0.8], [0.6], "2 models"),
    ],
)
def test_fit_line_rejects_underdetermined_input(ref, shift, match):
    with pytest.raises(DataError, match=match):
        fit_line(ref, shift)


def _exact_band(z_ref: np.ndarray, z_shift: np.ndarray, z_grid: np.ndarray) -> np.ndarray:
    """Fitted-line values on the grid for every one of the k^k model resamples (with scipy)."""
    k = z_ref.size
    lines = []
    for idx in itertools.product(range(k), repeat=k):
        idx = list(idx)
        if np.ptp(z_ref[idx]) == 0:
            continue  # no line through one repeated point
        res = sps.linregress(z_ref[idx], z_shift[idx])
        lines.append(res.intercept + res.slope * z_grid)
    return np.array(lines)


def test_line_band_matches_exhaustive_resampling():
    rng = np.random.default_rng(2)
    acc_ref = rng.uniform(0.55, 0.95, size=5)
    acc_shift = sps.norm.cdf(0.8 * sps.norm.ppf(acc_ref) - 0.4 + rng.normal(0, 0.08, size=5))
    grid = np.array([0.5, 0.75, 0.9, 0.97])
    band = line_band(acc_ref, acc_shift, grid, n_boot=20000, seed=1)
    exact = _exact_band(sps.norm.ppf(acc_ref), sps.norm.ppf(acc_shift), sps.norm.ppf(grid))
    assert 5 < band.n_boot_drawn - band.n_boot < 70  # expected 20000 * 5 / 5**5 = 32 degenerate
    for j in range(grid.size):
        for end, q in ((band.lo[j], 0.025), (band.hi[j], 0.975)):
            z = sps.norm.ppf(end)
            below = np.mean(exact[:, j] < z - 1e-9)
            at_or_below = np.mean(exact[:, j] <= z + 1e-9)
            assert below - 0.006 <= q <= at_or_below + 0.006  # 0.0011 Monte-Carlo sd


def test_line_band_of_two_models_is_their_line_and_skips_one_point_resamples():
    # a resample of two models either repeats one (no line, left out) or holds both
    ref, shift = [0.6, 0.9], [0.4, 0.7]
    band = line_band(ref, shift, [0.5, 0.75, 0.95], n_boot=400, seed=0)
    line = fit_line(ref, shift).predict([0.5, 0.75, 0.95])
    np.testing.assert_allclose(band.lo, line)
    np.testing.assert_allclose(band.hi, line)
    assert 150 < band.n_boot < 250 and band.n_boot_drawn == 400  # about half are degenerate


# ---------------------------------------------------------------- report edge


def _write_results(path, rows) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "family", "bench", "accuracy", "n"])
        writer.writerows(rows)


def _demo_rows() -> list[tuple]:
    rng = np.random.default_rng(5)
    rows = []
    for family, lift, count in (("clip", 0.0, 8), ("vlm", 0.35, 4)):
        for i in range(count):
            z = rng.uniform(0.3, 1.8)
            shift = sps.norm.cdf(0.9 * z - 0.7 + lift + rng.normal(0, 0.05))
            rows.append(
                (f"{family}-{i}", family, "ref-set", round(float(sps.norm.cdf(z)), 4), 5000)
            )
            rows.append((f"{family}-{i}", family, "shift-set", round(float(shift), 4), 4000))
    rows.append(("clip-0", "clip", "other-set", 0.5, 100))  # benches not compared are ignored
    return rows


def test_fit_from_results_writes_fit_and_scatter(tmp_path):
    csv_path = tmp_path / "results.csv"
    _write_results(csv_path, _demo_rows())
    out = tmp_path / "out"
    result = fit_from_results(
        csv_path, ref="ref-set", shift="shift-set", baseline="clip", out_dir=out
    )

    written = json.loads((out / "fit.json").read_text())
    assert written == json.loads(json.dumps(result.to_dict()))
    assert (out / "scatter.png").read_bytes()[:8] == PNG_MAGIC

    clip = [m for m in written["models"] if m["family"] == "clip"]
    ref = sps.linregress(
        sps.norm.ppf([m["acc_ref"] for m in clip]), sps.norm.ppf([m["acc_shift"] for m in clip])
    )
    assert written["fit"]["slope"] == pytest.approx(ref.slope)
    assert written["fit"]["intercept"] == pytest.approx(ref.intercept)
    assert written["fit"]["n"] == 8
    assert all(m["in_fit"] == (m["family"] == "clip") for m in written["models"])
    for m in written["models"]:
        expected = m["acc_shift"] - sps.norm.cdf(
            ref.intercept + ref.slope * sps.norm.ppf(m["acc_ref"])
        )
        assert m["effective_robustness"] == pytest.approx(expected)
        k = round(m["acc_ref"] * m["n_ref"])
        ci = sps.binomtest(k, m["n_ref"]).proportion_ci(method="exact")
        assert m["ci_ref"] == pytest.approx([ci.low, ci.high])
    lift = np.mean([m["effective_robustness"] for m in written["models"] if m["family"] == "vlm"])
    assert lift > 0.05  # the lifted family sits above the baseline line
    band = written["band"]
    assert band["level"] == 0.95 and len(band["grid"]) == len(band["lo"]) == len(band["hi"])
    assert all(lo <= hi for lo, hi in zip(band["lo"], band["hi"]))


def test_fit_from_results_without_baseline_uses_all_models(tmp_path):
    csv_path = tmp_path / "results.csv"
    _write_results(csv_path, _demo_rows())
    result = fit_from_results(
        csv_path, ref="ref-set", shift="shift-set", transform="logit", out_dir=tmp_path
    )
    assert result.fit.n == 12 and result.fit.transform == "logit"
    assert all(m.in_fit for m in result.models)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda rows: [r[:3] + r[4:] for r in rows], "missing column"),
        (lambda rows: [r for r in rows if r[2] != "shift-set"], "no rows for bench 'shift-set'"),
        (lambda rows: [r for r in rows if (r[0], r[2]) != ("vlm-1", "shift-set")], "vlm-1.*no row"),
        (lambda rows: rows + [("clip-2", "clip", "ref-set", 0.9, 50)], "second row"),
        (lambda rows: rows + [("clip-2", "vlm", "x", 0.9, 50)], "family"),
        (lambda rows: rows + [("new", "clip", "ref-set", 81.5, 50)], r"fraction in \[0, 1\]"),
        (lambda rows: rows + [("new", "clip", "ref-set", 0.8, "many")], "integer"),
    ],
)
def test_bad_results_csv_names_file_and_row(tmp_path, mutate, match):
    csv_path = tmp_path / "results.csv"
    if "missing column" in match:
        with open(csv_path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["model", "family", "bench", "n"])
            writer.writerows(mutate(_demo_rows()))
    else:
        _write_results(csv_path, mutate(_demo_rows()))
    with pytest.raises(DataError, match=match) as err:
        fit_from_results(
            csv_path, ref="ref-set", shift="shift-set", baseline="clip", out_dir=tmp_path
        )
    assert str(csv_path) in str(err.value)
    if match != "no rows for bench 'shift-set'":
        assert err.value.record is not None


def test_missing_baseline_family_is_a_data_error(tmp_path):
    csv_path = tmp_path / "results.csv"
    _write_results(csv_path, _demo_rows())
    with pytest.raises(DataError, match="'siglip' has 0 model"):
        fit_from_results(
            csv_path, ref="ref-set", shift="shift-set", baseline="siglip", out_dir=tmp_path
        )


def test_simulate_to_dir_writes_json_and_png(tmp_path):
    result = simulate_to_dir(
        tmp_path, dim=60, sample_sizes=[30, 120], xis=[1.0, 2.0], n_test=300, n_boot=100
    )
    assert json.loads((tmp_path / "simulate.json").read_text())["predicted"] == result["predicted"]
    assert (tmp_path / "simulate.png").read_bytes()[:8] == PNG_MAGIC


# ---------------------------------------------------------------- plot helpers


def test_percent_axis_places_ticks_at_transformed_percentages():
    fig = Figure()
    ax = fig.subplots()
    percent_axis(ax, "x", lambda a: transform(a, "probit"), (0.6, 0.96), label="ref")
    np.testing.assert_allclose(ax.get_xticks(), sps.norm.ppf([0.6, 0.7, 0.8, 0.9, 0.95]))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["60%", "70%", "80%", "90%", "95%"]
    np.testing.assert_allclose(ax.get_xlim(), sps.norm.ppf([0.6, 0.96]))
    percent_axis(ax, "y", lambda a: transform(a, "probit"), (0.84, 0.86))  # narrow: 3 even ticks
    assert [t.get_text() for t in ax.get_yticklabels()] == ["84.5%", "85%", "85.5%"]


def test_plot_series_and_bar_with_ci_write_pngs(tmp_path):
    rows = [{"step": s, "loss": 1 / (s + 1), "lambda": 10.0 ** (s / 10)} for s in range(50)]
    rows.insert(10, {"step": 10, "eval_acc": 0.6})  # rows without a key are not on its curve
    path = plot_series(
        rows, ["loss", "lambda"], tmp_path / "curves.png", "training", log_keys=["lambda"]
    )
    assert path.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(DataError, match="penalty"):
        plot_series(rows, ["penalty"], tmp_path / "none.png", "x")
    bars = bar_with_ci(
        ["erm", "birm"], [0.5, 0.6], [0.45, 0.52], [0.55, 0.7], tmp_path / "bars.png", "acc"
    )
    assert bars.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(DataError, match="contain its mean"):
        bar_with_ci(["erm"], [0.5], [0.55], [0.6], tmp_path / "bad.png", "acc")
