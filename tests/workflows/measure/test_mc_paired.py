"""`mc eval`'s report and results.json: each model against the baseline question by question per
benchmark, checked against statsmodels / scipy on hand-written question files and on a tiny run."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from bad_input import run_cli
from PIL import Image
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from robustvlm.errors import DataError
from robustvlm.model_ref import ModelRef
from robustvlm.multiple_choice.build import MCQuestion, write_questions
from robustvlm.workflows.mc_eval import RESULT_COLUMNS, model_slug
from robustvlm.workflows.measure import mc_paired
from robustvlm.workflows.measure.compare import compare_runs

RNG = np.random.default_rng(5)


def _write_run(out, model, bench, correct_by_rotation):
    path = out / model_slug(model) / f"{bench}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"q{i}", "rotation": r, "answer": 0, "prediction": 0 if c else 1, "correct": bool(c)}
            for i, per_rotation in enumerate(correct_by_rotation) for r, c in enumerate(per_rotation)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _results_csv(out, rows):
    with (out / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RESULT_COLUMNS)
        writer.writeheader()
        writer.writerows({"model": m, "family": "vlm", "method": "loglik", "bench": b, "accuracy": 0.5, "n": 1,
                          "ci_lo": 0.0, "ci_hi": 1.0, "unparsed": 0} for m, b in rows)


def _mcnemar_p(a, b):
    table = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
    return mcnemar(table, exact=True).pvalue


def test_report_compares_each_model_with_the_baseline_per_benchmark(tmp_path):
    models, benches = ["m-a", "m-b", "m-c"], ["clean", "rotated"]
    truth = {(m, b): RNG.random((40, 2)) < p for m, p in zip(models, (0.5, 0.7, 0.3)) for b in benches}
    for (m, b), correct in truth.items():
        _write_run(tmp_path, m, b, correct)
    _results_csv(tmp_path, truth)
    paths = mc_paired.write_mc_report(tmp_path, [ModelRef.parse(m) for m in models],
                                      [f"q/{b}.jsonl" for b in benches], circular=True, baseline=ModelRef.parse("m-b"))
    saved = json.loads(paths[0].read_text())
    assert saved["baseline"] == "m-b" and list(saved["paired"]) == ["m-a", "m-c"]
    for model in ("m-a", "m-c"):
        assert list(saved["paired"][model]) == ["clean", "rotated", "all"]
        for bench in ["clean", "rotated", "all"]:
            def circular(m, b=bench):  # a question is right only if both its rotations are
                keys = benches if b == "all" else [b]
                return np.concatenate([truth[m, k].all(axis=1) for k in keys])
            a, b = circular(model), circular("m-b")
            got = saved["paired"][model][bench]
            assert got["n"] == a.size and got["difference"] == pytest.approx(a.mean() - b.mean())
            assert got["se"] == pytest.approx(stats.sem(a.astype(float) - b.astype(float)))
            assert got["mcnemar_p"] == pytest.approx(_mcnemar_p(a, b))
    page = paths[1].read_text()
    assert "## Paired comparison with m-b" in page and "| m-c | rotated | 40 |" in page
    assert paths[2].read_text().startswith("<!DOCTYPE html>")


def test_one_model_writes_no_paired_table_and_keeps_other_results_keys(tmp_path):
    _write_run(tmp_path, "m-a", "clean", [[True], [False]])
    _results_csv(tmp_path, [("m-a", "clean")])
    (tmp_path / "results.json").write_text(json.dumps({"blind": {"kept": True}}))
    results_json, md, _ = mc_paired.write_mc_report(tmp_path, [ModelRef.parse("m-a")], ["clean.jsonl"], circular=False)
    saved = json.loads(results_json.read_text())
    assert saved["paired"] == {} and saved["blind"] == {"kept": True}
    assert "Paired comparison" not in md.read_text()


def test_different_questions_are_refused_naming_one(tmp_path):
    _write_run(tmp_path, "m-a", "clean", [[True], [False]])
    _write_run(tmp_path, "m-b", "clean", [[True]])
    with pytest.raises(DataError, match="different questions .*'q1#0'"):
        mc_paired.mc_paired(tmp_path, [ModelRef.parse("m-a"), ModelRef.parse("m-b")], ["clean"], circular=False)


def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (40 * i % 256, 90, 255 - 30 * i % 256)).save(buf, format="PNG")
    return buf.getvalue()


def test_mc_eval_command_writes_the_paired_figures_of_its_per_question_files(tmp_path, capsys):
    classes = ["dog", "cat", "bird"]
    bench = tmp_path / "shapes.jsonl"
    write_questions([MCQuestion(id=f"img{i}", image=_png(i), question="", options=classes[i % 3:] + classes[: i % 3],
                                answer=i % 3, source="test", dataset_class="x", prompt="What is shown?")
                     for i in range(8)], bench, embed_images=True)
    out = tmp_path / "mc"
    argv = ["mc", "eval", "--model", "tiny:clip", "--model", "tiny:siglip", "--benchmark", str(bench), "--out", str(out)]
    assert run_cli([*argv, "--baseline", "tiny:llava"]) == 2
    assert "--baseline 'tiny:llava' is not one of the --model values" in capsys.readouterr().err
    assert run_cli([*argv, "--baseline", "tiny:siglip"]) == 0
    correct = {m: np.array([json.loads(line)["correct"] for line in (out / m / "shapes.jsonl").read_text().splitlines()])
               for m in ("tiny_clip", "tiny_siglip")}
    got = json.loads((out / "results.json").read_text())["paired"]["tiny:clip"]["shapes"]
    a, b = correct["tiny_clip"], correct["tiny_siglip"]
    assert got["difference"] == pytest.approx(a.mean() - b.mean())
    assert got["mcnemar_p"] == pytest.approx(_mcnemar_p(a, b))
    same = compare_runs(out / "tiny_clip" / "shapes.jsonl", out / "tiny_siglip" / "shapes.jsonl")
    assert same.groups["all"].to_dict() == pytest.approx(got)  # `compare` on the two files: the same row
    assert "Paired comparison with tiny:siglip" in (out / "report.html").read_text()
