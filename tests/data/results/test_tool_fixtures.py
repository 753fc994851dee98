"""The readers on files written by the tools' own code (tests/data/fixtures/results/, written by
tools/write_result_fixtures.py with lmms-eval 0.7.3 and clip_benchmark 1.6.2): every accuracy
robustvlm reads equals the aggregate the tool wrote (to 1e-9), a re-run is read once, and every
record left out is listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robustvlm.data.results import ReadOptions, detect_format, read_results_file
from robustvlm.errors import DataError
from robustvlm.workflows.measure.compare import compare_runs
from tests.helpers.bad_input import run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
OUT = FIXTURES / "lmms_eval"
SMALL, LARGE = "lmms-lab/llava-onevision-qwen2-0.5b-ov", "lmms-lab/llava-onevision-qwen2-7b-ov"
FIRST, RERUN = "20260101_120000", "20260102_090000"
#: the tool's headline number of each task: (key in its results.json, scale)
HEADLINE = {"ai2d": ("exact_match,none", 1.0), "mmstar": ("average,none", 1.0),
            "mmbench_en_dev_static": ("gpt_eval_score,none", 100.0)}


def _folder(model: str) -> Path:
    return OUT / model.replace("/", "__")


def _tool(model: str, date: str) -> dict:
    return json.loads((_folder(model) / f"{date}_results.json").read_text(encoding="utf-8"))


def _tool_accuracy(model: str, date: str, task: str) -> float:
    key, scale = HEADLINE[task]
    return _tool(model, date)["results"][task][key] / scale


def _accuracies(path: Path, **options: object) -> dict[tuple[str, str], dict]:
    return {(r["model"], r["bench"]): r for r in read_results_file(path, options=ReadOptions(**options)).accuracies}


def test_lmms_eval_output_folder_reads_every_models_latest_run_exactly():
    assert detect_format(OUT) == "lmms_eval"
    rows = _accuracies(OUT)
    expected = {(SMALL, "ai2d"): _tool_accuracy(SMALL, RERUN, "ai2d"),  # the re-run, not the first run
                **{(SMALL, t): _tool_accuracy(SMALL, FIRST, t) for t in ("mmstar", "mmbench_en_dev_static")},
                **{(LARGE, t): _tool_accuracy(LARGE, "20260101_130000", t) for t in HEADLINE}}
    assert set(rows) == set(expected)
    for key, value in expected.items():
        assert rows[key]["accuracy"] == pytest.approx(value, abs=1e-9), key
    assert rows[(SMALL, "ai2d")]["n"] == _tool(SMALL, RERUN)["n-samples"]["ai2d"]["effective"] == 20
    # the MMStar shape: `average` (the mean over l2 categories), not its first category
    assert rows[(SMALL, "mmstar")]["accuracy"] != _tool(SMALL, FIRST)["results"]["mmstar"]["coarse perception,none"]


def test_the_flat_model_folder_and_run_option_read_the_same_numbers():
    flat = _accuracies(_folder(SMALL))
    assert flat == {k: v for k, v in _accuracies(OUT).items() if k[0] == SMALL}
    first = _accuracies(_folder(SMALL), run=FIRST)
    assert first[(SMALL, "ai2d")]["accuracy"] == pytest.approx(_tool_accuracy(SMALL, FIRST, "ai2d"), abs=1e-9)
    with pytest.raises(DataError, match="--run 20990101_000000: no run of that DATE"):
        read_results_file(OUT, options=ReadOptions(run="20990101_000000"))


def test_a_rerun_is_read_once_and_what_is_left_out_is_listed(capsys):
    table = read_results_file(OUT)
    ai2d = [q for q in table.questions if q["model"] == SMALL and q["bench"] == "ai2d"]
    assert len(ai2d) == 20 and len({q["id"] for q in ai2d}) == 20
    assert sum(q["correct"] for q in ai2d) / 20 == pytest.approx(_tool_accuracy(SMALL, RERUN, "ai2d"), abs=1e-9)
    why = {(Path(s.file).name, s.record): s.why for s in table.skipped}
    assert "an earlier run (20260101_120000) of task ai2d" in why[(f"{FIRST}_results.json", "ai2d")]
    assert "holds no score" in why[(f"{FIRST}_samples_mmbench_en_dev_static.jsonl", "mmbench_en_dev_static")]
    err = capsys.readouterr().err
    assert f"skipped {len(table.skipped)} record(s)" in err and "earlier run" in err
    with pytest.raises(DataError, match="--strict"):
        read_results_file(OUT, options=ReadOptions(strict=True))


def test_mmstar_question_rows_give_the_tools_average_over_l2_categories():
    questions = [q for q in read_results_file(_folder(SMALL)).questions if q["bench"] == "mmstar"]
    by_l2: dict[str, list[float]] = {}
    for q in questions:
        by_l2.setdefault(q["l2_category"], []).append(q["correct"])
    macro = sum(sum(v) / len(v) for v in by_l2.values()) / len(by_l2)
    assert macro == pytest.approx(_tool_accuracy(SMALL, FIRST, "mmstar"), abs=1e-9)
    mean = sum(q["correct"] for q in questions) / len(questions)
    assert mean != pytest.approx(macro)  # the categories are unequal: the question mean is not the tool's number


def test_samples_alone_give_their_mean_or_refer_to_the_results_file(tmp_path):
    for name in (f"{FIRST}_samples_ai2d.jsonl", f"{FIRST}_samples_mmstar.jsonl"):
        (tmp_path / name).write_bytes((_folder(SMALL) / name).read_bytes())
    table = read_results_file(tmp_path)
    (row,) = table.accuracies  # ai2d: numbers, so the mean is the task's `mean` aggregate
    assert row["accuracy"] == pytest.approx(_tool_accuracy(SMALL, FIRST, "ai2d"), abs=1e-9)
    assert any(s.record == "mmstar" and "give its results file" in s.why for s in table.skipped)


def test_compare_on_a_folder_with_a_rerun_equals_the_single_run_comparison():
    pooled = compare_runs(_folder(SMALL), _folder(LARGE), n_boot=200).groups["ai2d"]
    single = compare_runs(_folder(SMALL) / f"{RERUN}_samples_ai2d.jsonl",
                          _folder(LARGE) / "20260101_130000_samples_ai2d.jsonl", n_boot=200).groups["ai2d"]
    assert pooled.n == single.n == 20
    assert pooled.to_dict() == single.to_dict()


def test_fit_and_convert_read_the_same_latest_run(tmp_path, capsys):
    assert run_cli(["robustness", "fit", str(OUT), "--ref", "ai2d", "--shift", "mmstar", "--out",
                    str(tmp_path / "fit")]) == 0
    fit = json.loads((tmp_path / "fit" / "fit.json").read_text())
    small = next(m for m in fit["models"] if m["model"] == SMALL)
    assert small["acc_ref"] == pytest.approx(_tool_accuracy(SMALL, RERUN, "ai2d"), abs=1e-9)
    assert fit["skipped"]["count"] >= 2 and any("earlier run" in r["why"] for r in fit["skipped"]["records"])
    assert run_cli(["robustness", "convert", str(OUT), "--out", str(tmp_path / "long.csv")]) == 0
    lines = (tmp_path / "long.csv").read_text().splitlines()
    assert len(lines) == 1 + 6  # two models x three tasks, each once
    capsys.readouterr()


def test_clip_benchmark_json_and_build_csv_equal_the_tools_acc1_and_list_retrieval():
    folder = FIXTURES / "clip_benchmark"
    expected = {}
    for file in folder.glob("*_zeroshot_classification.json"):
        record = json.loads(file.read_text())
        expected[(f"{record['model']} {record['pretrained']}", record["dataset"])] = record["metrics"]["acc1"]
    assert len(expected) == 4
    for path in (folder, FIXTURES / "clip_benchmark_build.csv"):
        assert detect_format(path) == "clip_benchmark"
        table = read_results_file(path)
        got = {(r["model"], r["bench"]): r["accuracy"] for r in table.accuracies}
        assert got.keys() == expected.keys()
        assert all(got[k] == pytest.approx(v, abs=1e-9) for k, v in expected.items())
        assert len(table.skipped) == 2 and all("zeroshot_retrieval" in s.why for s in table.skipped)
