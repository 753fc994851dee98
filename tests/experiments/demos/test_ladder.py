"""`robustvlm demo ladder --quick`: every rung and method runs, the report says what was measured,
and a re-run resumes from the kept runs."""

from __future__ import annotations

import json
import shutil

import pytest
from report_checks import assert_opens_with_verdict, assert_smoke_verdict_only, without_data_read

from robustvlm.cli import main
from robustvlm.experiments.ladder import run as ladder
from robustvlm.experiments.ladder.plan import QUICK
from robustvlm.experiments.ladder.readings import summarize, summary_to_dict
from robustvlm.experiments.ladder.results import LadderResults
from robustvlm.experiments.ladder.rung import VLM, Rung


def test_quick_ladder_writes_its_report_and_resumes(quick_demo, tmp_path, monkeypatch):
    out = tmp_path / "ladder"
    shutil.copytree(quick_demo("ladder"), out)  # the session's shared quick run: its given-environment runs are kept
    assert main(["demo", "ladder", "--quick", "--inferred-envs", "--out", str(out)]) == 0
    assert_opens_with_verdict(out)
    results = json.loads((out / "results.json").read_text())
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    plan = QUICK
    given = [r for r in runs if r["envs"] == ladder.GIVEN]
    assert len(given) == len(plan.cells) * len(ladder.ladder_methods()) * len(plan.seeds)
    assert len(runs) - len(given) == (len(plan.infer_on) * len(ladder.INFERRED) * len(ladder.INFERRED_METHODS)
                                      * len(plan.seeds))
    assert set(results["summary"]) == {f"{s}/{r.id}" for s, r in plan.cells}
    assert results["summary"] == json.loads(json.dumps(summary_to_dict(summarize(
        given, ladder.TRAIN_ENVS, ladder.TEST_ENVS, ladder.PROTOTYPES))))
    assert json.loads(json.dumps(LadderResults.from_dict(results).to_dict())) == without_data_read(results)  # written from and read back through its class
    cpu = results["cpu_seconds"]
    assert set(cpu) == {"prepare", "inferred", *results["summary"]} and cpu["prepare"] > 0
    for part in results["summary"]:
        assert cpu[part] == round(sum(r["cpu_s"] for r in given if f"{r['source']}/{r['rung']}" == part), 1) > 0
    # every evaluation's per-picture answers, in predictions.jsonl (not in runs.jsonl), pair the methods with ERM
    predictions = [json.loads(line) for line in (out / ladder.PREDICTIONS_FILE).read_text().splitlines()]
    assert len(predictions) == sum(len(r["evaluations"]) for r in runs) * len(ladder.TEST_ENVS)
    assert all("correct" not in e for r in runs for e in r["evaluations"])
    final = {(p["rung"], p["method"], p["envs"], p["env"]): p["correct"] for p in predictions
             if p["step"] == (plan.vlm.steps if Rung.parse(p["rung"]).kind == VLM else plan.steps)}
    for run in given:
        for env in ladder.TEST_ENVS:
            bits = final[run["rung"], run["method"], run["envs"], env]
            assert bits.count("1") / len(bits) == run["evaluations"][-1]["acc"][env]
    paired = results["paired"]["final"]
    assert set(paired) == set(results["summary"])
    for cell, methods in paired.items():
        assert set(methods) == set(ladder.ladder_methods()) - {"erm", "oracle"}
        for method, by_env in methods.items():
            erm = results["summary"][cell]["erm"]["final"]
            for env, verdict in by_env.items():
                ours = results["summary"][cell][method]["final"][env]["mean"]
                assert verdict["difference"] == pytest.approx(ours - erm[env]["mean"]) and verdict["seeds"] == 1
    assert "## Paired test over pictures, final step" in (out / "report.md").read_text()
    inference = results["inference"]["mnist/pixels"]
    assert set(inference) == set(ladder.INFERRED)
    assert all(0.5 <= v["purity_given"] <= 1 and sum(v["sizes"]) == 360 for v in inference.values())
    for run in runs:
        every, last = ((plan.vlm.eval_every, plan.vlm.steps) if Rung.parse(run["rung"]).kind == VLM
                       else (plan.eval_every, plan.steps))
        assert [e["step"] for e in run["evaluations"]] == list(range(every, last + 1, every))
    report = (out / "report.md").read_text()
    assert_smoke_verdict_only(report, "The invariance ladder")
    assert "grayscale oracle" in report and "ladder.png" in report
    assert "Environments inferred from data" in report and "± 0.0" not in report  # one seed: no spread
    assert "VLM rungs: the tiny offline Idefics3" in report and "mnist/vlm:head:tiny:idefics3" in report
    assert (out / "report.html").is_file() and (out / "ladder.png").stat().st_size > 0

    calls = []
    monkeypatch.setattr(ladder, "fit_mlp", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(ladder, "vlm_evaluations", lambda *a, **k: calls.append(a))
    assert main(["demo", "ladder", "--quick", "--out", str(out)]) == 0
    assert calls == []  # every run was kept: nothing trains again
    again = json.loads((out / "results.json").read_text())  # without --inferred-envs: the four rungs only
    assert again["inference"] == {} and "inferred" not in again["cpu_seconds"]
    assert again["summary"] == results["summary"]
    # a subset (--methods, --seeds) finds the same kept runs: nothing trains, only those are summarised
    assert main(["demo", "ladder", "--quick", "--methods", "oracle,erm", "--seeds", "0", "--out", str(out)]) == 0
    assert calls == []
    subset = json.loads((out / "results.json").read_text())
    assert subset["plan"]["methods"] == ["erm", "oracle"]
    assert all(set(entries) == {"erm", "oracle"} for entries in subset["summary"].values())
    assert all(subset["summary"][cell][m] == results["summary"][cell][m]
               for cell in results["summary"] for m in ("erm", "oracle"))
