"""The robustness report edge: a results CSV -> fit.json + scatter.png, checked against scipy, and
the simulation written to a folder (the line fits themselves: tests/analysis/test_accuracy_on_the_line.py)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from scipy import stats as sps

from robustvlm.errors import DataError
from robustvlm.workflows.measure.robustness_fit import fit_from_results, simulate_to_dir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
    skipped = written.pop("skipped")
    assert written == json.loads(json.dumps(result.to_dict()))
    assert skipped == {"count": 0, "by_file": {}, "records": []}  # robustvlm's CSV leaves nothing out
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
        csv_path, ref="ref-set", shift="shift-set", transform="logit", out_dir=tmp_path / "fit"
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


def test_a_fit_claims_its_folder_and_never_overwrites_an_earlier_fit(tmp_path, capsys):
    """Issue 17.11: `robustness fit` into a folder holding a fit overwrote it."""
    from bad_input import expect_clean_failure

    from robustvlm.cli import main

    csv_path = tmp_path / "results.csv"
    _write_results(csv_path, _demo_rows())
    out = tmp_path / "fit"
    argv = ["robustness", "fit", str(csv_path), "--ref", "ref-set", "--shift", "shift-set", "--out", str(out)]
    assert main(argv) == 0
    assert (out / "config.resolved.yaml").is_file() and (out / "fit.json").is_file()
    expect_clean_failure([*argv[:-2], "--out", str(out), "--transform", "logit"], capsys,
                         mentions=[str(out), "--resume"], untouched=out)
    expect_clean_failure([*argv, "--transform", "logit", "--resume"], capsys,
                         mentions=["differs in ['transform']"], untouched=out)
    assert main([*argv, "--resume"]) == 0  # the same fit again
