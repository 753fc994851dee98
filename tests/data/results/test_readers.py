"""The results readers on files built as each tool's writer builds them (tests/helpers/result_files.py),
on open_clip's shipped table, and on a malformed file of each kind (one error line naming file and
record, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robustvlm.data.results import (
    ReadOptions,
    detect_format,
    fill_counts,
    read_results_file,
    standard_size,
)
from robustvlm.data.results.openclip import NOT_ACCURACY, pretraining_source
from robustvlm.errors import DataError
from tests.helpers.bad_input import expect_clean_failure
from tests.helpers.result_files import (
    DATE,
    clip_benchmark_json,
    lmms_eval_run,
    vlmevalkit_acc,
    vlmevalkit_frame,
    vlmevalkit_sheet,
)

OPENCLIP = Path(__file__).parents[3] / "docs" / "data" / "openclip_results.csv"


def test_a_registered_reader_is_offered_by_the_cli(tmp_path, monkeypatch, capsys):
    """Issue 50.3: a reader is one registry line (name, reader, detector, help); every command that
    reads results files then takes its name and lists it in --format's help, with no other copy."""
    from robustvlm.cli import build_parser
    from robustvlm.data.results import ResultFormat, ResultTable
    from robustvlm.data.results.formats import RESULT_FORMATS

    def read(path, options):
        return ResultTable(accuracies=[{"model": "m", "bench": path.read_text(encoding="utf-8"), "accuracy": 0.5}])

    monkeypatch.setitem(RESULT_FORMATS, "my_tool", ResultFormat(read, lambda path: path.suffix == ".mine",
                                                                "my tool's file", "my tool's JSON"))
    (tmp_path / "r.mine").write_text("bench-a", encoding="utf-8")
    assert read_results_file(tmp_path / "r.mine").accuracies[0]["bench"] == "bench-a"  # detected
    assert detect_format(tmp_path / "r.mine") == "my_tool"
    monkeypatch.chdir(tmp_path)
    parser = build_parser()
    for command in (["robustness", "fit", "r.csv", "--ref", "a", "--shift", "b"], ["robustness", "subsets", "r.csv", "--ref", "a", "--shift", "b"],
                    ["robustness", "convert", "r.csv", "--out", "o.csv"], ["compare", "a.csv", "b.csv"]):
        assert parser.parse_args([*command, "--format", "my_tool"]).format == "my_tool"
    assert parser.parse_args(["robustness", "fit", "r.csv", "--ref", "a", "--shift", "b",
                              "--baseline-table-format", "my_tool"]).baseline_table_format == "my_tool"
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "--help"])
    assert "my_tool (my tool's JSON)" in " ".join(capsys.readouterr().out.split())
    monkeypatch.delitem(RESULT_FORMATS, "my_tool")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compare", "a.csv", "b.csv", "--format", "my_tool"])
    assert "invalid choice: 'my_tool'" in capsys.readouterr().err


def test_openclip_table_as_published_reads_121_models_on_27_accuracies_and_lists_11_other_measures():
    table = read_results_file(OPENCLIP)
    assert detect_format(OPENCLIP) == "openclip"
    models = {r["model"] for r in table.accuracies}
    assert len(models) == 121 and len(table.accuracies) == 121 * 27
    assert sorted(s.record for s in table.skipped) == sorted(f"column {c}" for c in NOT_ACCURACY)
    everything = read_results_file(OPENCLIP, options=ReadOptions(allow_non_accuracy=True))
    assert len(everything.accuracies) == 121 * 38 and not everything.skipped
    pets = next(r for r in everything.accuracies if r["bench"] == "Oxford-IIIT Pet")
    assert pets["measure"] == "mean per-class recall" and pets["n"] is None
    row = next(r for r in table.accuracies if r["model"] == "ViT-B-32 openai" and r["bench"] == "ImageNet 1k")
    assert row["family"] == "OpenAI WIT" and 0.6 < row["accuracy"] < 0.65 and row["n"] is None


@pytest.mark.parametrize("tag, source", [("laion2b_s34b_b79k", "LAION-2B/5B"), ("dfn5b", "DFN"),
                                         ("commonpool_xl_laion_s13b_b90k", "CommonPool"), ("openai", "OpenAI WIT"),
                                         ("mscoco_finetuned_laion2b_s13b_b90k", "LAION-2B/5B"), ("v1", "other"),
                                         ("laion400m_e32", "LAION-400M"), ("datacomp_xl_s13b_b90k", "DataComp")])
def test_pretrained_tags_map_to_their_data_source(tag, source):
    assert pretraining_source(tag) == source


def test_counts_come_from_the_file_then_the_user_then_the_standard_table():
    rows = [{"bench": "imagenet-r", "n": None, "line": 1}, {"bench": "ImageNet v2", "n": 7, "n_from": "file",
                                                            "line": 2},
            {"bench": "mine", "n": None, "line": 3}]
    fill_counts(rows, ["imagenet-r", "ImageNet v2", "mine"], {"mine": 12}, "f.csv")
    assert [(r["n"], r["n_from"]) for r in rows] == [(30_000, "table"), (7, "file"), (12, "user")]
    assert standard_size("wds/imagenet_sketch") == 50_889 and standard_size("ObjectNet") == 18_574
    with pytest.raises(DataError, match="--n-questions"):
        fill_counts([{"bench": "odd", "n": None, "line": 4}], ["odd"], {}, "f.csv")


def test_clip_benchmark_folder_reads_classification_and_lists_retrieval_as_skipped(tmp_path):
    clip_benchmark_json(tmp_path, "imagenet1k", "ViT-B-32", "laion2b_s34b_b79k", 0.66)
    clip_benchmark_json(tmp_path, "wds/imagenet-r", "ViT-B-32", "laion2b_s34b_b79k", 0.77)
    clip_benchmark_json(tmp_path, "flickr30k", "ViT-B-32", "laion2b_s34b_b79k", 0.9, task="zeroshot_retrieval")
    assert detect_format(tmp_path) == "clip_benchmark"
    table = read_results_file(tmp_path)
    assert sorted((r["bench"], r["accuracy"]) for r in table.accuracies) == [("imagenet1k", 0.66),
                                                                            ("wds/imagenet-r", 0.77)]
    assert table.accuracies[0]["model"] == "ViT-B-32 laion2b_s34b_b79k"
    assert table.accuracies[0]["family"] == "LAION-2B/5B" and len(table.skipped) == 1


def test_lmms_eval_run_gives_counts_and_questions_by_doc_id(tmp_path):
    scores = np.array([1, 0, 1, 1, 0, 1], dtype=float)
    folder = lmms_eval_run(tmp_path, "org/model-a", {"mmbench_en": scores, "ai2d": scores[:4]})
    assert detect_format(folder) == "lmms_eval"
    table = read_results_file(folder)
    row = next(r for r in table.accuracies if r["bench"] == "mmbench_en")
    assert (row["model"], row["n"], row["accuracy"]) == ("org/model-a", 6, pytest.approx(4 / 6))
    questions = [q for q in table.questions if q["bench"] == "mmbench_en"]
    assert [q["id"] for q in questions] == [str(i) for i in range(6)]
    assert [q["correct"] for q in questions] == scores.tolist()
    alone = read_results_file(folder / f"{DATE}_samples_ai2d.jsonl")  # the model from the results file beside it
    assert {q["model"] for q in alone.questions} == {"org/model-a"} and alone.accuracies[0]["n"] == 4


@pytest.mark.parametrize("suffix", [".xlsx", ".tsv"])
def test_vlmevalkit_sheet_scores_predictions_against_answers(tmp_path, suffix):
    correct = np.array([1, 1, 0, 1, 0, 0, 1, 1], dtype=bool)
    path = vlmevalkit_sheet(tmp_path, "Qwen2-VL-2B", "MMBench_DEV_EN", vlmevalkit_frame(correct, ["a", "b"]), suffix)
    assert detect_format(path) == "vlmevalkit"
    table = read_results_file(path)
    assert [q["correct"] for q in table.questions] == correct.astype(float).tolist()
    assert {(q["model"], q["bench"]) for q in table.questions} == {("Qwen2-VL-2B", "MMBench_DEV_EN")}
    assert [q["env"] for q in table.questions[:2]] == ["a", "b"]
    assert table.accuracies[0]["n"] == 8 and table.accuracies[0]["accuracy"] == pytest.approx(5 / 8)


def test_vlmevalkit_result_sheet_hit_wins_and_acc_csv_fills_other_datasets(tmp_path):
    frame = vlmevalkit_frame(np.ones(4, dtype=bool), ["a"])
    vlmevalkit_sheet(tmp_path, "M", "SEEDBench", frame)
    judged = frame.assign(hit=[0, 1, 1, 1], log="")
    judged.to_excel(tmp_path / "M" / "M_SEEDBench_exact_matching_result.xlsx", index=False)
    vlmevalkit_acc(tmp_path, "M", "AI2D_TEST", 0.71)
    table = read_results_file(tmp_path / "M")
    assert [q["correct"] for q in table.questions] == [0, 1, 1, 1]
    assert sorted((r["bench"], r["accuracy"]) for r in table.accuracies) == [("AI2D_TEST", 0.71),
                                                                            ("SEEDBench", 0.75)]


def _malformed(tmp_path: Path, kind: str) -> tuple[Path, str, list[str]]:
    """A malformed file of each kind: (path, its format, what the error must name)."""
    if kind == "openclip":
        path = tmp_path / "openclip_results.csv"
        path.write_text("name,pretrained,ImageNet 1k,ImageNet-R\nViT-B-32,openai,0.63,0.69\nRN50,openai,high,0.5\n")
        return path, kind, [str(path) + ":3", "high"]
    if kind == "clip_benchmark":
        path = clip_benchmark_json(tmp_path, "imagenet1k", "RN50", "openai", 0.5)
        data = json.loads(path.read_text())
        data["metrics"]["acc1"] = 59.8  # a percentage
        path.write_text(json.dumps(data))
        return path, kind, [str(path), path.name, "59.8"]
    if kind == "lmms_eval":
        folder = lmms_eval_run(tmp_path, "m", {"pope": np.array([1.0, 0.0, 1.0])})
        path = folder / f"{DATE}_samples_pope.jsonl"
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0], lines[1][:20], lines[2]]) + "\n")
        return path, kind, [str(path) + ":2"]
    path = vlmevalkit_sheet(tmp_path, "M", "MMStar", vlmevalkit_frame(np.ones(3, dtype=bool), ["a"]), ".tsv")
    text = path.read_text().splitlines()
    path.write_text("\n".join([text[0], text[1], text[2].replace('"1"', '""', 1), text[3]]) + "\n")
    return path, kind, [str(path) + ":3", "index"]


@pytest.mark.parametrize("kind", ["openclip", "clip_benchmark", "lmms_eval", "vlmevalkit"])
def test_a_malformed_file_of_each_kind_is_one_error_naming_file_and_record(tmp_path, capsys, kind):
    path, fmt, mentions = _malformed(tmp_path, kind)
    argv = ["robustness", "fit", str(path), "--ref", "a", "--shift", "b", "--format", fmt, "--out",
            str(tmp_path / "out")]
    expect_clean_failure(argv, capsys, mentions=mentions)


def test_lmms_eval_scales_percentages_by_name_or_range_and_lists_other_scores(tmp_path):
    folder = lmms_eval_run(tmp_path, "m", {"a": np.ones(4), "b": np.ones(4), "c": np.ones(4), "mmbench_x": np.ones(4)})
    path = folder / f"{DATE}_results.json"
    data = json.loads(path.read_text())
    data["results"]["a"] = {"alias": "a", "overall_acc,none": 62.5}  # an accuracy in percent (its name says acc)
    data["results"]["b"] = {"alias": "b", "mme_perception_score,none": 1500.0}  # a score of another kind
    data["results"]["c"] = {"alias": "c", "relaxed_overall,none": 40.0}  # no accuracy by name: not guessed
    data["results"]["mmbench_x"] = {"alias": "mmbench_x", "gpt_eval_score,none": 0.5}  # mmbench_*: always percent
    path.write_text(json.dumps(data))
    for task in "abc":
        (folder / f"{DATE}_samples_{task}.jsonl").unlink()
    table = read_results_file(path)
    assert {r["bench"]: r["accuracy"] for r in table.accuracies} == {"a": 0.625, "mmbench_x": 0.005}
    assert {s.record for s in table.skipped} == {"results.b", "results.c"}
