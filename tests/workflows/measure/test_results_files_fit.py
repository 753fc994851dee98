"""`robustness fit` and `robustness subsets` on the field's results files: the acceptance command on
open_clip's table as published (against scipy), --group-by and --baseline-table end to end, and the
subset analysis on VLMEvalKit sheets of a constructed case."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from robustvlm.data.results import read_results_file
from tests.helpers.bad_input import run_cli
from tests.helpers.result_files import clip_benchmark_json, vlmevalkit_frame, vlmevalkit_sheet

OPENCLIP = Path(__file__).parents[3] / "docs" / "data" / "openclip_results.csv"


def _column(name: str) -> dict[str, float]:
    return {r["model"]: r["accuracy"] for r in read_results_file(OPENCLIP).accuracies if r["bench"] == name}


def test_the_acceptance_command_fits_imagenet_r_on_the_published_table(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "openclip_results.csv").write_bytes(OPENCLIP.read_bytes())
    assert run_cli(["robustness", "fit", "openclip_results.csv", "--ref", "ImageNet 1k", "--shift", "ImageNet-R"]) == 0
    fit = json.loads((tmp_path / "robustness_fit" / "fit.json").read_text())
    ref, shift = _column("ImageNet 1k"), _column("ImageNet-R")
    expected = sps.linregress(sps.norm.ppf([ref[m] for m in ref]), sps.norm.ppf([shift[m] for m in ref]))
    assert fit["fit"]["n"] == 121
    assert (fit["fit"]["slope"], fit["fit"]["r2"]) == pytest.approx((expected.slope, expected.rvalue**2))
    assert round(fit["fit"]["slope"], 2) == 1.18 and round(fit["fit"]["r2"], 2) == 0.96
    assert {m["n_ref"] for m in fit["models"]} == {50_000} and {m["n_shift"] for m in fit["models"]} == {30_000}
    assert "slope 1.181" in capsys.readouterr().out


@pytest.mark.slow
def test_group_by_source_and_a_baseline_table_of_my_own_models(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    clip_benchmark_json(mine, "imagenet1k", "my-vlm", "sft", 0.70)
    clip_benchmark_json(mine, "imagenet-r", "my-vlm", "sft", 0.90)
    argv = ["robustness", "fit", str(OPENCLIP), "--ref", "ImageNet 1k", "--shift", "ImageNet-R", "--group-by",
            "source", "--baseline", "LAION-2B/5B", "--baseline-table", str(mine), "--n-boot", "200",
            "--n-questions", "imagenet-r=2000", "--out", str(tmp_path / "out")]
    assert run_cli(argv) == 0
    groups = json.loads((tmp_path / "out" / "groups.json").read_text())
    by_name = {g["group"]: g for g in groups["groups"]}
    assert len(by_name) == 12 and by_name["LAION-2B/5B"]["er_models"] is None
    ref, shift = _column("ImageNet 1k"), _column("ImageNet-R")
    laion = [m for m in ref if "laion" in m.split(" ")[1] and "laion400m" not in m and "commonpool" not in m]
    fit = sps.linregress(sps.norm.ppf([ref[m] for m in laion]), sps.norm.ppf([shift[m] for m in laion]))
    openai = [m for m in ref if m.endswith(" openai")]
    er = np.mean([shift[m] - sps.norm.cdf(fit.slope * sps.norm.ppf(ref[m]) + fit.intercept) for m in openai])
    assert by_name["OpenAI WIT"]["er_models"]["value"] == pytest.approx(er)
    placed = json.loads((tmp_path / "out" / "placed.json").read_text())["models"][0]
    assert placed["model"] == "my-vlm sft" and placed["n_ref"] == 50_000 and placed["n_shift"] == 2_000
    assert placed["effective_robustness"] == pytest.approx(0.90 - sps.norm.cdf(fit.slope * sps.norm.ppf(0.70)
                                                                                + fit.intercept))
    lo, hi = placed["ci"]
    assert lo < placed["effective_robustness"] < hi
    assert (tmp_path / "out" / "groups.png").stat().st_size > 0
    assert "OpenAI WIT (12 models)" in capsys.readouterr().out


def _vlmevalkit_work_dir(root: Path, models: int = 30) -> Path:
    """`models` models' sheets: an ID set whose accuracy is Phi(ability), and a shifted set with two
    categories following the ability and one of coin flips."""
    rng = np.random.default_rng(0)
    ability = rng.normal(0, 0.8, models)
    for i, a in enumerate(ability):
        name = f"vlm{i:02d}"
        id_correct = rng.random(400) < sps.norm.cdf(a)
        vlmevalkit_sheet(root, name, "IDSET", vlmevalkit_frame(id_correct, ["all"]), ".tsv")
        p = np.concatenate([sps.norm.cdf(a - rng.normal(0.3, 0.3, 120)), np.full(60, 0.5)])
        shifted = vlmevalkit_frame(rng.random(180) < p, ["x"])
        shifted["category"] = ["dogs"] * 60 + ["cats"] * 60 + ["coins"] * 60
        vlmevalkit_sheet(root, name, "SHIFTED", shifted, ".tsv")
    return root


def test_subsets_on_vlmevalkit_sheets_single_out_the_coin_flips(tmp_path, capsys):
    root = _vlmevalkit_work_dir(tmp_path / "work")
    folders = sorted(str(p) for p in root.iterdir())
    assert run_cli(["robustness", "subsets", *folders, "--ref", "IDSET", "--shift", "SHIFTED", "--by", "category",
                    "--worst-fraction", "0.33", "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "subsets.json").read_text())
    by_name = {s["subset"]: s for s in result["subsets"]}
    assert by_name["coins"]["line"]["r2"] < 0.2 < 0.7 < min(by_name["dogs"]["line"]["r2"], by_name["cats"]["line"]["r2"])
    coin_ids = {str(i) for i in range(120, 180)}
    assert len(coin_ids & set(result["worst"]["questions"])) / len(result["worst"]["questions"]) > 0.7
    assert result["worst"]["held_out_r2"] < result["worst"]["held_out_rest_r2"]
    assert "coins (60 questions)" in capsys.readouterr().out


def test_convert_writes_robustvlms_csv_which_fits_to_the_same_line(tmp_path, capsys):
    out = tmp_path / "long.csv"
    assert run_cli(["robustness", "convert", str(OPENCLIP), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "left out" in printed.out and "SUN397" in printed.out  # no standard count
    assert "[column Flickr]: mean recall@1" in printed.err  # not an accuracy: listed, not converted
    assert run_cli(["robustness", "fit", str(out), "--ref", "ImageNet 1k", "--shift", "ImageNet-R", "--out",
                    str(tmp_path / "fit")]) == 0
    fit = json.loads((tmp_path / "fit" / "fit.json").read_text())["fit"]
    assert round(fit["slope"], 3) == 1.181 and fit["n"] == 121
    assert run_cli(["robustness", "convert", str(OPENCLIP), "--out", str(out)]) == 0  # its own: replaced
    mine = tmp_path / "mine.csv"
    mine.write_text("mine")
    assert run_cli(["robustness", "convert", str(OPENCLIP), "--out", str(mine)]) == 2  # a user's: never
    assert "not written by robustvlm" in capsys.readouterr().err and mine.read_text() == "mine"
    # the converted CSV keeps the reader's columns, so it groups as the original does
    assert run_cli(["robustness", "fit", str(out), "--ref", "ImageNet 1k", "--shift", "ImageNet-R", "--group-by",
                    "source", "--n-boot", "100", "--out", str(tmp_path / "groups")]) == 0
    assert len(json.loads((tmp_path / "groups" / "groups.json").read_text())["groups"]) == 12


def test_a_column_that_is_no_accuracy_is_refused_by_fit_and_converted_only_when_asked(tmp_path, capsys):
    argv = ["robustness", "fit", str(OPENCLIP), "--ref", "ImageNet 1k", "--shift", "Oxford-IIIT Pet", "--out",
            str(tmp_path / "fit")]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert "error: " in err and "bench 'Oxford-IIIT Pet' was left out: mean per-class recall" in err
    out = tmp_path / "all.csv"
    assert run_cli(["robustness", "convert", str(OPENCLIP), "--out", str(out), "--benchmark", "Oxford-IIIT Pet",
                    "--allow-non-accuracy"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 121 and {(r["n"], r["n_from"], r["measure"]) for r in rows} == {
        ("", "none", "mean per-class recall")}  # never given the test split's 3,669 as a question count
    assert run_cli(["robustness", "fit", str(out), "--ref", "a", "--shift", "b", "--out", str(tmp_path / "f2")]) == 2
    assert "empty value(s) in column(s) n" in capsys.readouterr().err  # a measure without a count cannot be fitted
