"""The VLMEvalKit reader against sheets VLMEvalKit's own code wrote and scored
(tools/write_vlmevalkit_fixtures.py: its dump, mcq_vanilla_eval / mcq_circular_eval with the
exact-matching judge, report_acc and can_infer, at the commit the script names): robustvlm's
accuracy equals VLMEvalKit's `_acc.csv` to 1e-9, or robustvlm refuses in one line (issue 51)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from robustvlm.data.results import ReadOptions, read_results_file
from robustvlm.data.results.vlmevalkit_match import infer
from robustvlm.errors import DataError

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests/data/fixtures/vlmevalkit"
WORK = ROOT / "docs/data/vlmevalkit_work"
MODEL = "sim_llava_v1.5_7b"
CASES = {"vanilla": "MMStar", "circular": "MMBench_DEV_EN", "free_text": "AI2D_TEST"}


def vlmevalkit_overall(acc_csv: Path) -> dict[str, float]:
    """VLMEvalKit's report_acc: {split: Overall}."""
    with acc_csv.open(encoding="utf-8") as f:
        return {row["split"]: float(row["Overall"]) for row in csv.DictReader(f)}


def vlmevalkit_hits(result_sheet: Path) -> dict[str, float]:
    """{index: hit} of VLMEvalKit's _exact_matching_result sheet."""
    import openpyxl

    rows = list(openpyxl.load_workbook(result_sheet, read_only=True).active.iter_rows(values_only=True))
    header = list(rows[0])
    return {str(r[header.index("index")]): float(r[header.index("hit")]) for r in rows[1:]}


def test_can_infer_reads_every_hard_prediction_as_vlmevalkit_does():
    cases = json.loads((FIXTURES / "can_infer.json").read_text(encoding="utf-8"))
    assert len(cases) >= 25 and {c["can_infer"] for c in cases} >= {None, "Z", "A", "B", "C", "D"}
    assert [infer(c["prediction"], c["choices"]) for c in cases] == [c["can_infer"] for c in cases]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_models_folder_reads_vlmevalkits_own_accuracy(case):
    folder = FIXTURES / case / MODEL
    (row,) = read_results_file(folder).accuracies
    assert (row["model"], row["bench"]) == (MODEL, CASES[case])
    assert row["accuracy"] == pytest.approx(next(iter(vlmevalkit_overall(
        folder / f"{MODEL}_{CASES[case]}_acc.csv").values())), abs=1e-9)


@pytest.mark.parametrize("case", ["circular", "free_text"])
def test_a_prediction_sheet_alone_is_scored_as_vlmevalkit_scores_it(case):
    folder = FIXTURES / case / MODEL
    table = read_results_file(folder / f"{MODEL}_{CASES[case]}.xlsx")
    (row,) = table.accuracies
    assert row["accuracy"] == pytest.approx(vlmevalkit_overall(folder / f"{MODEL}_{CASES[case]}_acc.csv")
                                            .popitem()[1], abs=1e-9)
    hits = vlmevalkit_hits(folder / f"{MODEL}_{CASES[case]}_exact_matching_result.xlsx")
    assert {q["id"]: q["correct"] for q in table.questions} == hits


def test_circular_rotations_are_one_question_right_only_if_every_rotation_is():
    folder = FIXTURES / "circular" / MODEL
    table = read_results_file(folder / f"{MODEL}_MMBench_DEV_EN.xlsx")
    (row,) = table.accuracies
    assert row["n"] == 50  # 200 rows: 50 questions in 4 rotations
    assert row["accuracy"] == pytest.approx(0.26, abs=1e-9)  # VLMEvalKit's _acc.csv (rows alone: far higher)
    assert all(int(q["id"]) < 1_000_000 for q in table.questions)


def test_free_text_the_judge_would_read_is_refused_in_one_line_naming_row():
    sheet = FIXTURES / "vanilla" / MODEL / f"{MODEL}_MMStar.xlsx"
    with pytest.raises(DataError) as err:
        read_results_file(sheet)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{sheet}:")
    assert "LLM judge" in message and "run VLMEvalKit's evaluation" in message


def test_acc_csv_only_names_the_bench_as_the_dataset_and_each_of_several_splits():
    table = read_results_file(FIXTURES / "acc_only" / MODEL)
    got = {r["bench"]: r["accuracy"] for r in table.accuracies}
    scienceqa = vlmevalkit_overall(FIXTURES / "acc_only" / MODEL / f"{MODEL}_ScienceQA_IMG_acc.csv")
    assert got == {"MMBench_DEV_EN": 0.26, **{f"ScienceQA_IMG ({s})": v for s, v in scienceqa.items()}}


def test_a_work_folder_of_six_models_reads_every_model_with_underscores_in_its_name():
    table = read_results_file(WORK)
    models = sorted(p.name for p in WORK.iterdir() if p.is_dir())
    assert len(models) == 6 and "sim_llava_v1.5_7b" in models and "sim_InternVL2_5-1B" in models
    assert sorted({r["model"] for r in table.accuracies}) == models
    for row in table.accuracies:
        expected = vlmevalkit_overall(WORK / row["model"] / f"{row['model']}_{row['bench']}_acc.csv")
        assert row["accuracy"] == pytest.approx(next(iter(expected.values())), abs=1e-9)
    assert len(table.accuracies) == 12


def test_a_flat_folder_is_refused_rather_than_its_model_names_guessed(tmp_path):
    for model in ("sim_llava_v1.5_7b", "sim_idefics2_8b"):
        shutil.copy(WORK / model / f"{model}_MMStar.xlsx", tmp_path / f"{model}_MMStar.xlsx")
    with pytest.raises(DataError, match="cannot tell the model from the file name"):
        read_results_file(tmp_path, "vlmevalkit")


def test_a_model_folder_without_links_is_read_from_its_latest_eval_id(tmp_path):
    model = tmp_path / "work" / MODEL
    for run in ("T20260101-120000", "T20260102-120000"):
        (model / run).mkdir(parents=True)
    shutil.copy(FIXTURES / "free_text" / MODEL / f"{MODEL}_AI2D_TEST.xlsx", model / "T20260102-120000")
    shutil.copy(FIXTURES / "circular" / MODEL / f"{MODEL}_MMBench_DEV_EN.xlsx", model / "T20260101-120000")
    (row,) = read_results_file(tmp_path / "work").accuracies
    assert (row["model"], row["bench"], row["accuracy"]) == (MODEL, "AI2D_TEST", pytest.approx(0.7, abs=1e-9))


def test_n_questions_applies_to_an_acc_csv_bench_as_named(tmp_path):
    from robustvlm.workflows.measure.convert_results import convert_results

    out = tmp_path / "long.csv"
    done = convert_results(FIXTURES / "acc_only" / MODEL, out, n_questions={"MMBench_DEV_EN": 4329})
    with out.open(encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["bench"], float(row["accuracy"]), row["n"], row["n_from"]) == ("MMBench_DEV_EN", 0.26, "4329", "user")
    assert done.left_out == ["ScienceQA_IMG (test)", "ScienceQA_IMG (val)"]


def write_sheet(path: Path, header: list[str], rows: list[list[object]]) -> None:
    """An .xlsx (as VLMEvalKit's dump writes it) or a .csv of `header` and `rows`."""
    if path.suffix == ".csv":
        with path.open("w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows([header, *rows])
        return
    import openpyxl

    book = openpyxl.Workbook()
    for row in [header, *rows]:
        book.active.append(row)
    book.save(path)


def add_mme_files(model_folder: Path) -> list[Path]:
    """The files VLMEvalKit's yes/no evaluation (ImageYORNDataset) writes for MME beside a
    model's multiple-choice sheets: the prediction sheet (no option columns), `_auxmatch` (its
    extracted answers and scores) and `_score.csv` (the scores per category)."""
    model = model_folder.name
    prediction = model_folder / f"{model}_MME.xlsx"
    header = ["index", "question", "answer", "category", "prediction"]
    rows = [[i, "Is there a cat?", "Yes" if i % 2 else "No", "existence", "Yes"] for i in range(6)]
    write_sheet(prediction, header, rows)
    auxmatch = model_folder / f"{model}_MME_auxmatch.xlsx"
    write_sheet(auxmatch, [*header, "extracted", "score"], [[*r, "Yes", int(r[2] == "Yes")] for r in rows])
    score = model_folder / f"{model}_MME_score.csv"
    write_sheet(score, ["perception", "reasoning", "existence"], [[100.0, 0.0, 100.0]])
    return [prediction, auxmatch, score]


def test_a_work_folder_with_a_yes_no_datasets_files_reads_the_mcq_benches_and_lists_them(tmp_path):
    work = tmp_path / "work"
    shutil.copytree(WORK, work)
    added = add_mme_files(work / MODEL)
    table = read_results_file(work)
    plain = read_results_file(WORK)
    assert [(r["model"], r["bench"], r["accuracy"], r["n"]) for r in table.accuracies] == \
        [(r["model"], r["bench"], r["accuracy"], r["n"]) for r in plain.accuracies]
    assert sorted(s.file for s in table.skipped) == sorted(map(str, added))
    whys = {Path(s.file).name: s.why for s in table.skipped}
    assert "no option columns" in whys[f"{MODEL}_MME.xlsx"] and "no option columns" in whys[f"{MODEL}_MME_auxmatch.xlsx"]
    assert "no column(s) index, answer, prediction" in whys[f"{MODEL}_MME_score.csv"]
    with pytest.raises(DataError, match=r"--strict refuses") as err:
        read_results_file(work, options=ReadOptions(strict=True))
    assert str(err.value).startswith(f"{added[0]}") and "\n" not in str(err.value)


def test_a_folder_of_only_a_yes_no_dataset_says_why_nothing_is_read(tmp_path):
    folder = tmp_path / MODEL
    folder.mkdir()
    add_mme_files(folder)
    with pytest.raises(DataError, match=r"no VLMEvalKit multiple-choice sheet .*3 sheet\(s\) left out.*no option columns"):
        read_results_file(folder)


def test_an_mcq_sheet_the_judge_would_read_is_still_refused_beside_skipped_files(tmp_path):
    folder = tmp_path / MODEL
    shutil.copytree(FIXTURES / "vanilla" / MODEL, folder)
    for name in (f"{MODEL}_MMStar_exact_matching_result.xlsx", f"{MODEL}_MMStar_acc.csv"):
        (folder / name).unlink(missing_ok=True)
    add_mme_files(folder)
    with pytest.raises(DataError, match="LLM judge"):
        read_results_file(folder)
