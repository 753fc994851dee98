"""VLMEvalKit's files as users meet them broken (issue 52.1-2, 51): `robustness fit` (and its
--baseline-table), `robustness subsets`, `robustness convert` and `compare` on them stop with
one `error:` line naming the file (and the row or index), never a traceback or a wrong number.
Kinds of bad input covered: 25 (an .xlsx that is not a zip, cut in half or empty, each in
subsets, compare and fit --baseline-table; a sheet with a header and no rows; a .tsv row with
fewer cells than its header; a non-UTF-8 _acc.csv, with --format and detected (in a row or its
header; given as a file or a folder; to convert, fit and compare); an index held twice in compare
and in subsets; an empty .tsv; convert of _acc.csv files with no question count; one model given
twice to subsets; a circular sheet holding rotations only; a yes/no dataset's files beside the
multiple-choice ones under --strict). Without --strict those files are listed, not refused."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from bad_input import expect_clean_failure, run_cli

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "docs/data/vlmevalkit_work"
ACC_ONLY = ROOT / "tests/data/fixtures/vlmevalkit/acc_only"
MODEL = "sim_llava_v1.5_7b"


def _work_copy(root: Path) -> Path:
    work = root / "work"
    shutil.copytree(WORK, work)
    return work


def _not_a_zip(sheet: Path) -> None:
    sheet.write_text("index,answer,prediction\n1,A,A\n", encoding="utf-8")


def _cut_in_half(sheet: Path) -> None:
    data = sheet.read_bytes()
    sheet.write_bytes(data[: len(data) // 2])


def _empty(sheet: Path) -> None:
    sheet.write_bytes(b"")


BREAKS: dict[str, Callable[[Path], None]] = {"not_a_zip": _not_a_zip, "cut_in_half": _cut_in_half, "empty": _empty}


def _broken_sheet(root: Path, how: str) -> tuple[Path, Path]:
    """(a work folder copy, its MMStar sheet of MODEL broken `how`)."""
    work = _work_copy(root)
    sheet = work / MODEL / f"{MODEL}_MMStar.xlsx"
    BREAKS[how](sheet)
    return work, sheet


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_broken_xlsx_in_subsets_is_one_line_naming_it(tmp_path, capsys, how):
    work, sheet = _broken_sheet(tmp_path, how)
    expect_clean_failure(["robustness", "subsets", str(work), "--ref", "MMBench_DEV_EN", "--shift", "MMStar",
                          "--out", str(tmp_path / "out")], capsys, mentions=[str(sheet), "xlsx"])


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_broken_xlsx_in_compare_is_one_line_naming_it(tmp_path, capsys, how):
    work, sheet = _broken_sheet(tmp_path, how)
    expect_clean_failure(["compare", str(sheet), str(work / "sim_idefics2_8b" / "sim_idefics2_8b_MMStar.xlsx"),
                          "--out", str(tmp_path / "out")], capsys, mentions=[str(sheet)])


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_broken_xlsx_as_baseline_table_is_one_line_naming_it(tmp_path, capsys, how):
    work, sheet = _broken_sheet(tmp_path, how)
    expect_clean_failure(["robustness", "fit", str(WORK), "--ref", "MMBench_DEV_EN", "--shift", "MMStar",
                          "--baseline-table", str(work / MODEL), "--n-boot", "100", "--out", str(tmp_path / "out")],
                         capsys, mentions=[str(sheet)])


def test_a_sheet_with_a_header_and_no_rows(tmp_path, capsys):
    work = _work_copy(tmp_path)
    sheet = work / MODEL / f"{MODEL}_MMStar.tsv"
    (work / MODEL / f"{MODEL}_MMStar.xlsx").unlink()
    sheet.write_text('"index"\t"question"\t"A"\t"B"\t"answer"\t"prediction"\n', encoding="utf-8")
    expect_clean_failure(["robustness", "fit", str(work), "--ref", "MMBench_DEV_EN", "--shift", "MMStar",
                          "--out", str(tmp_path / "out")], capsys, mentions=[str(sheet), "no rows"])


def test_a_row_with_fewer_cells_than_its_header_names_file_and_row(tmp_path, capsys):
    folder = tmp_path / MODEL
    folder.mkdir()
    sheet = folder / f"{MODEL}_MMStar.tsv"
    sheet.write_text('"index"\t"A"\t"B"\t"answer"\t"prediction"\n"0"\t"cat"\t"dog"\t"A"\t"A"\n"1"\t"cat"\t"dog"\n',
                     encoding="utf-8")
    expect_clean_failure(["compare", str(sheet), str(sheet), "--out", str(tmp_path / "out")], capsys,
                         mentions=[f"{sheet}:3", "3 cells", "header of 5"])


def test_a_non_utf8_acc_csv_names_the_file(tmp_path, capsys):
    folder = tmp_path / MODEL
    shutil.copytree(ACC_ONLY / MODEL, folder)
    acc = folder / f"{MODEL}_MMBench_DEV_EN_acc.csv"
    acc.write_bytes(acc.read_bytes().replace(b'"dev"', b'"d\xe9v"'))
    expect_clean_failure(["robustness", "convert", str(folder), "--format", "vlmevalkit", "--n-questions",
                          "MMBench_DEV_EN=4329", "--out", str(tmp_path / "out.csv")], capsys,
                         mentions=[str(acc), "UTF-8"])
    assert not (tmp_path / "out.csv").exists()


def _non_utf8_acc(root: Path, where: str) -> Path:
    """A copy of the _acc.csv-only model folder whose MMBench _acc.csv holds a Latin-1 byte in its
    `where` ("row": the split, "header": a category's name); returns that file."""
    folder = root / MODEL
    shutil.copytree(ACC_ONLY / MODEL, folder)
    acc = folder / f"{MODEL}_MMBench_DEV_EN_acc.csv"
    old, new = (b'"dev"', b'"d\xe9v"') if where == "row" else (b'"perception"', b'"perc\xe9ption"')
    acc.write_bytes(acc.read_bytes().replace(old, new))
    return acc


@pytest.mark.parametrize("where", ["row", "header"])
@pytest.mark.parametrize("command", ["convert_file", "convert_folder", "fit_folder", "compare_file"])
def test_a_non_utf8_acc_csv_detected_without_format_is_one_line(tmp_path, capsys, where, command):
    acc = _non_utf8_acc(tmp_path, where)
    given = str(acc if command.endswith("_file") else acc.parent)
    argv = {"convert": ["robustness", "convert", given, "--n-questions", "MMBench_DEV_EN=4329", "--out",
                        str(tmp_path / "out.csv")],
            "fit": ["robustness", "fit", given, "--ref", "MMBench_DEV_EN", "--shift", "ScienceQA_IMG (test)",
                    "--out", str(tmp_path / "out")],
            "compare": ["compare", given, given, "--out", str(tmp_path / "out")]}[command.split("_")[0]]
    error = expect_clean_failure(argv, capsys, mentions=[str(acc), "UTF-8", "0xe9"])
    assert "VLMEvalKit" in error  # detected as VLMEvalKit's, not as robustvlm's own results CSV
    assert not (tmp_path / "out.csv").exists()


def _work_with_mme(root: Path) -> tuple[Path, Path]:
    """(a work folder copy with MME's yes/no prediction sheet beside MODEL's sheets, that sheet)."""
    work = _work_copy(root)
    sheet = work / MODEL / f"{MODEL}_MME.tsv"
    sheet.write_text('"index"\t"question"\t"answer"\t"category"\t"prediction"\n'
                     '"0"\t"Is there a cat?"\t"Yes"\t"existence"\t"Yes"\n', encoding="utf-8")
    return work, sheet


def test_a_yes_no_datasets_sheet_in_a_work_folder_is_listed_and_the_fit_runs(tmp_path, capsys):
    work, sheet = _work_with_mme(tmp_path)
    out = tmp_path / "out"
    assert run_cli(["robustness", "fit", str(work), "--ref", "MMBench_DEV_EN", "--shift", "MMStar", "--n-boot",
                    "100", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"skipped: {sheet} [header]: no option columns" in err and "skipped 1 record(s) in 1 file(s)" in err
    fit = json.loads((out / "fit.json").read_text(encoding="utf-8"))
    assert fit["skipped"]["by_file"] == {str(sheet): 1} and len(fit["models"]) == 6
    assert round(fit["fit"]["slope"], 3) == 0.766  # the work folder's fit without the sheet (the guide's line)


def test_a_yes_no_datasets_sheet_under_strict_is_one_line(tmp_path, capsys):
    work, sheet = _work_with_mme(tmp_path)
    expect_clean_failure(["robustness", "fit", str(work), "--ref", "MMBench_DEV_EN", "--shift", "MMStar", "--strict",
                          "--out", str(tmp_path / "out")], capsys, mentions=[str(sheet), "no option columns",
                                                                             "--strict"])
    assert not (tmp_path / "out").exists()


def _duplicated_index(root: Path) -> tuple[Path, Path]:
    """(a work folder copy, its MMStar .tsv of MODEL whose second question repeats the first's index)."""
    work = _work_copy(root)
    (work / MODEL / f"{MODEL}_MMStar.xlsx").unlink()
    sheet = work / MODEL / f"{MODEL}_MMStar.tsv"
    lines = ['"index"\t"A"\t"B"\t"C"\t"D"\t"answer"\t"category"\t"prediction"']
    lines += [f'"{i}"\t"cat"\t"dog"\t"cow"\t"owl"\t"A"\t"math"\t"A"' for i in (0, 1, 1, 3)]
    sheet.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return work, sheet


def test_a_duplicated_index_in_compare_names_it(tmp_path, capsys):
    work, sheet = _duplicated_index(tmp_path)
    expect_clean_failure(["compare", str(sheet), str(sheet), "--out", str(tmp_path / "out")], capsys,
                         mentions=[f"{sheet}:4", "index 1 is held twice"])


def test_a_duplicated_index_in_subsets_names_it(tmp_path, capsys):
    work, sheet = _duplicated_index(tmp_path)
    expect_clean_failure(["robustness", "subsets", str(work), "--ref", "MMBench_DEV_EN", "--shift", "MMStar",
                          "--out", str(tmp_path / "out")], capsys, mentions=[f"{sheet}:4", "index 1"])


def test_an_empty_tsv_names_the_file(tmp_path, capsys):
    folder = tmp_path / MODEL
    folder.mkdir()
    sheet = folder / f"{MODEL}_MMStar.tsv"
    sheet.write_text("", encoding="utf-8")
    expect_clean_failure(["compare", str(sheet), str(sheet), "--format", "vlmevalkit", "--out",
                          str(tmp_path / "out")], capsys, mentions=[str(sheet), "no rows"])


def test_convert_refuses_rather_than_write_no_rows(tmp_path, capsys):
    out = tmp_path / "out.csv"
    expect_clean_failure(["robustness", "convert", str(ACC_ONLY / MODEL), "--out", str(out)], capsys,
                         mentions=["no benchmark has a question count", "--n-questions 'MMBench_DEV_EN=N'"])
    assert not out.exists()


def test_subsets_refuses_a_model_given_twice(tmp_path, capsys):
    expect_clean_failure(["robustness", "subsets", str(WORK), str(WORK / MODEL), "--ref", "MMBench_DEV_EN", "--shift",
                          "MMStar", "--out", str(tmp_path / "out")], capsys,
                         mentions=[str(WORK / MODEL), "read twice", MODEL])


def test_a_circular_sheet_of_rotations_only_names_the_file(tmp_path, capsys):
    folder = tmp_path / MODEL
    folder.mkdir()
    sheet = folder / f"{MODEL}_MMBench_DEV_EN.tsv"
    lines = ['"index"\t"A"\t"B"\t"answer"\t"prediction"']
    lines += [f'"{i}"\t"cat"\t"dog"\t"A"\t"A"' for i in (1_000_000, 2_000_000)]
    sheet.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expect_clean_failure(["compare", str(sheet), str(sheet), "--out", str(tmp_path / "out")], capsys,
                         mentions=[str(sheet), "first rotation"])
