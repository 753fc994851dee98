"""The readers of other tools' results files (issue 52: open_clip, clip_benchmark, lmms-eval)
given bad files: a byte that is not UTF-8, a cut file, wrong types, a boolean as an accuracy,
counts that are no positive whole number, duplicated ids, an empty samples file, a device as the
file. Each is one error line naming the file and record, never a traceback and never a number
read wrong; records left out on purpose are listed, and `--strict` refuses them.
Kinds of bad input covered: 20."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.bad_input import expect_clean_failure, run_cli
from tests.helpers.result_files import DATE, clip_benchmark_json, lmms_eval_run

OPENCLIP_HEAD = "name,pretrained,params (M),FLOPs (B),ImageNet 1k,ImageNet-R\n"
OPENCLIP_ROWS = [f"M{i},laion2b_s34b_b79k,1,1,0.{50 + i},0.{40 + i}\n" for i in range(10)]


def _openclip(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "openclip_results.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _fit(path: Path | str, tmp_path: Path, *extra: str) -> list[str]:
    return ["robustness", "fit", str(path), "--ref", "ImageNet 1k", "--shift", "ImageNet-R", "--out",
            str(tmp_path / "fit"), *extra]


def _lmms(tmp_path: Path, edit: Callable[[dict], None] | None = None) -> Path:
    """An lmms-eval model folder (two tasks, five documents), its results file edited by `edit`."""
    folder = lmms_eval_run(tmp_path / "out", "org/m", {"ai2d": np.array([1.0, 0, 1, 1, 0]),
                                                       "mmstar": np.array([1.0, 1, 0, 1, 0])})
    if edit is not None:
        path = folder / f"{DATE}_results.json"
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data, indent=2))
    return folder


def _lmms_fit(folder: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["robustness", "fit", str(folder), "--ref", "ai2d", "--shift", "mmstar", "--out", str(tmp_path / "fit"),
            *extra]


def case_latin1_byte_in_openclip_csv(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = _openclip(tmp_path, (OPENCLIP_HEAD + "".join(OPENCLIP_ROWS[:3])).encode() + b"Caf\xe9,openai,1,1,0.5,0.4\n")
    return _fit(path, tmp_path), [f"{path}:5", "not UTF-8", "0xe9"]


def case_latin1_byte_in_clip_benchmark_build_csv(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = tmp_path / "benchmark.csv"
    path.write_bytes(b"dataset,model,pretrained,task,acc1\nimagenet1k,ViT-B-32,openai,zeroshot_classification,0.6\n"
                     b"imagenet-r,ViT-B-32,op\xe9nai,zeroshot_classification,0.7\n")
    return _fit(path, tmp_path, "--format", "clip_benchmark"), [f"{path}:3", "not UTF-8"]


def case_truncated_openclip_csv(tmp_path: Path) -> tuple[list[str], list[str]]:
    text = OPENCLIP_HEAD + "".join(OPENCLIP_ROWS)
    path = _openclip(tmp_path, text[: len(text) - 8])  # the last row cut in its ImageNet 1k cell
    return _fit(path, tmp_path), [f"{path}:11", "cut short"]


def case_openclip_row_with_extra_cells(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = _openclip(tmp_path, OPENCLIP_HEAD + OPENCLIP_ROWS[0] + "M9,openai,1,1,0.5,0.4,0.3\n" + OPENCLIP_ROWS[1])
    return _fit(path, tmp_path), [f"{path}:3", "7 cells under a header of 6"]


def case_dev_zero_as_openclip_table(tmp_path: Path) -> tuple[list[str], list[str]]:
    return _fit("/dev/zero", tmp_path, "--format", "openclip"), ["/dev/zero", "not a regular file"]


def case_dev_zero_as_lmms_eval_results(tmp_path: Path) -> tuple[list[str], list[str]]:
    return _fit("/dev/zero", tmp_path, "--format", "lmms_eval"), ["/dev/zero", "no lmms-eval"]


def case_clip_benchmark_acc1_true(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = clip_benchmark_json(tmp_path, "imagenet1k", "RN50", "openai", 0.5)
    data = json.loads(path.read_text())
    data["metrics"]["acc1"] = True
    path.write_text(json.dumps(data))
    return _fit(tmp_path, tmp_path), [str(path), "boolean True"]


def case_clip_benchmark_json_cut_in_half(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = clip_benchmark_json(tmp_path, "imagenet1k", "RN50", "openai", 0.5)
    path.write_text(path.read_text()[:40])
    return _fit(path, tmp_path, "--format", "clip_benchmark"), [str(path), "not valid JSON"]


def case_lmms_effective_is_text(tmp_path: Path) -> tuple[list[str], list[str]]:
    folder = _lmms(tmp_path, lambda d: d["n-samples"]["ai2d"].update(effective="abc"))
    return _lmms_fit(folder, tmp_path), [f"{DATE}_results.json [n-samples.ai2d]", "'abc'"]


def case_lmms_n_samples_task_is_a_number(tmp_path: Path) -> tuple[list[str], list[str]]:
    folder = _lmms(tmp_path, lambda d: d["n-samples"].update(ai2d=5))
    return _lmms_fit(folder, tmp_path), [f"{DATE}_results.json [n-samples.ai2d]", "`effective`"]


def case_lmms_effective_negative(tmp_path: Path) -> tuple[list[str], list[str]]:
    folder = _lmms(tmp_path, lambda d: d["n-samples"]["ai2d"].update(effective=-5))
    return (["robustness", "convert", str(folder), "--out", str(tmp_path / "long.csv")],
            ["[n-samples.ai2d]", "positive integer", "-5"])


def case_lmms_effective_fraction(tmp_path: Path) -> tuple[list[str], list[str]]:
    folder = _lmms(tmp_path, lambda d: d["n-samples"]["ai2d"].update(effective=0.5))
    return (["robustness", "convert", str(folder), "--out", str(tmp_path / "long.csv")],
            ["[n-samples.ai2d]", "positive integer", "0.5"])


def case_lmms_accuracy_is_a_boolean(tmp_path: Path) -> tuple[list[str], list[str]]:
    folder = _lmms(tmp_path, lambda d: d["results"]["ai2d"].update({"exact_match,none": True}))
    return _lmms_fit(folder, tmp_path), ["[results.ai2d.exact_match,none]", "boolean True"]


def case_lmms_nan_accuracy_under_strict(tmp_path: Path) -> tuple[list[str], list[str]]:
    folder = _lmms(tmp_path, lambda d: d["results"]["mmstar"].update({"exact_match,none": float("nan")}))
    return _lmms_fit(folder, tmp_path, "--strict"), ["[results.mmstar]", "NaN", "--strict"]


def case_lmms_results_cut_in_half(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = _lmms(tmp_path) / f"{DATE}_results.json"
    path.write_text(path.read_text()[:300])
    return _lmms_fit(path.parent, tmp_path), [str(path), "not valid JSON"]


def case_lmms_duplicated_doc_id(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = _lmms(tmp_path) / f"{DATE}_samples_ai2d.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[2]]) + "\n")
    return ["compare", str(path), str(path)], [f"{path}:6", "doc_id 2 is held twice (first on line 3)"]


def case_lmms_empty_samples_file_under_strict(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = _lmms(tmp_path) / f"{DATE}_samples_ai2d.jsonl"
    path.write_text("")
    return ["compare", str(path), str(path), "--strict"], [str(path), "no samples"]


def case_lmms_samples_not_utf8(tmp_path: Path) -> tuple[list[str], list[str]]:
    path = _lmms(tmp_path) / f"{DATE}_samples_ai2d.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"question?"', b'"qu\xe9stion?"', 1))
    return ["compare", str(path), str(path)], [f"{path}:1", "not valid JSON"]


def case_lmms_run_that_does_not_exist(tmp_path: Path) -> tuple[list[str], list[str]]:
    return _lmms_fit(_lmms(tmp_path), tmp_path, "--run", "20991231_000000"), ["--run 20991231_000000", DATE]


def case_lmms_run_that_is_no_date(tmp_path: Path) -> tuple[list[str], list[str]]:
    return _lmms_fit(_lmms(tmp_path), tmp_path, "--run", "../x"), ["--run '../x'"]


CASES = {name.removeprefix("case_"): f for name, f in dict(globals()).items() if name.startswith("case_")}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_bad_results_file_is_one_line_naming_file_and_record(tmp_path, capsys, kind):
    argv, mentions = CASES[kind](tmp_path)
    started = time.monotonic()
    expect_clean_failure(argv, capsys, mentions=mentions)
    assert time.monotonic() - started < 30  # /dev/zero is refused, not read


def test_a_nan_task_and_an_empty_samples_file_are_listed_not_dropped(tmp_path, capsys):
    folder = _lmms(tmp_path, lambda d: d["results"]["mmstar"].update({"exact_match,none": float("nan")}))
    (folder / f"{DATE}_samples_mmstar.jsonl").unlink()
    (folder / f"{DATE}_samples_ai2d.jsonl").write_text("")
    assert run_cli(["robustness", "convert", str(folder), "--out", str(tmp_path / "long.csv")]) == 0
    err = capsys.readouterr().err
    assert f"{DATE}_results.json [results.mmstar]: exact_match,none is NaN" in err
    assert f"{DATE}_samples_ai2d.jsonl [ai2d]: the samples file has no samples" in err
    assert "skipped 2 record(s) in 2 file(s)" in err


def test_the_case_count_in_the_docstring_is_true():
    assert f"Kinds of bad input covered: {len(CASES)}." in (__doc__ or "")
