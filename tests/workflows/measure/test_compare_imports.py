"""`compare` on other tools' per-question results: two models' lmms-eval samples or VLMEvalKit sheets
pair by question id, and the paired figures match an independent computation (scipy)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as sps

from tests.helpers.bad_input import expect_clean_failure, run_cli
from tests.helpers.result_files import DATE, lmms_eval_run, vlmevalkit_frame, vlmevalkit_sheet


def _two_models(seed: int = 0, n: int = 120) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.random(n) < 0.7
    b = np.where(rng.random(n) < 0.8, a, ~a)
    return a.astype(float), b.astype(float)


def _check(out, a: np.ndarray, b: np.ndarray) -> None:
    overall = json.loads((out / "compare.json").read_text())["groups"]["all"]
    only_a, only_b = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    assert (overall["n"], overall["only_a"], overall["only_b"]) == (a.size, only_a, only_b)
    assert overall["difference"] == pytest.approx(a.mean() - b.mean())
    assert overall["mcnemar_p"] == pytest.approx(sps.binomtest(only_a, only_a + only_b, 0.5).pvalue)
    assert overall["se"] == pytest.approx(np.std(a - b, ddof=1) / np.sqrt(a.size))


def test_compare_pairs_two_lmms_eval_runs_by_doc_id(tmp_path, capsys):
    a, b = _two_models()
    run_a = lmms_eval_run(tmp_path / "out", "model-a", {"pope": a})
    run_b = lmms_eval_run(tmp_path / "out", "model-b", {"pope": b[::-1]})
    # model b's samples written in another order: pairing goes by doc_id, not position
    lines = (run_b / f"{DATE}_samples_pope.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    for row in rows:
        row["doc_id"] = a.size - 1 - row["doc_id"]
    (run_b / f"{DATE}_samples_pope.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli(["compare", str(run_a), str(run_b), "--out", str(tmp_path / "cmp"), "--n-boot", "200"]) == 0
    _check(tmp_path / "cmp", a, b)


def test_compare_pairs_two_vlmevalkit_sheets_by_index(tmp_path):
    a, b = _two_models(seed=1)
    sheet_a = vlmevalkit_sheet(tmp_path, "A", "MMStar", vlmevalkit_frame(a.astype(bool), ["x"]), ".xlsx")
    sheet_b = vlmevalkit_sheet(tmp_path, "B", "MMStar", vlmevalkit_frame(b.astype(bool), ["x"]), ".tsv")
    assert run_cli(["compare", str(sheet_a), str(sheet_b), "--out", str(tmp_path / "cmp"), "--n-boot", "200"]) == 0
    _check(tmp_path / "cmp", a, b)


def test_an_aggregate_only_file_is_refused_with_one_line(tmp_path, capsys):
    path = tmp_path / "openclip_results.csv"
    path.write_text("name,pretrained,ImageNet 1k\nRN50,openai,0.6\n")
    expect_clean_failure(["compare", str(path), str(path)], capsys, mentions=[str(path), "per-question"])
