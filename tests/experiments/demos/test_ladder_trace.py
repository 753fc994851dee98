"""`ladder_trace`: one ladder run traced step by step is the demo's run, and its logged weights
are Dynamic BIRM's recurrence."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from robustvlm.experiments.ladder.plan import QUICK
from robustvlm.experiments.ladder.run import run_ladder_demo
from robustvlm.experiments.ladder.rung import Rung
from robustvlm.experiments.ladder.trace import main, trace_run

RUNG = "vlm:full:tiny:idefics3"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ladder_trace")
    plan = replace(QUICK, rungs=(), vlm_source="fashion", modes=("full",), methods=("dynamic_birm",), infer_on=(),
                   workers=1)
    run_ladder_demo(out, plan, progress=False)
    return out


def test_a_traced_run_is_the_demos_run_and_logs_the_papers_recurrence(folder: Path) -> None:
    trace = json.loads(trace_run(folder, Rung.parse(RUNG), "dynamic_birm", 0, {}).read_text())
    run = json.loads((folder / "runs.jsonl").read_text().splitlines()[0])
    # tracing changes nothing (runs.jsonl keeps accuracies; the per-picture answers go to predictions.jsonl)
    assert [{k: v for k, v in e.items() if k != "correct"} for e in trace["evaluations"]] == run["evaluations"]
    steps = trace["steps"]
    assert [r["step"] for r in steps] == list(range(QUICK.vlm.steps))
    lam, first, expected = 0.0, None, []
    for r in steps:  # k_skip = the plan's anneal; gamma 0.15, alpha 0.8, p_min 0.05, eps_rel 0.1
        if r["step"] < QUICK.vlm.anneal:
            expected.append(0.0)
            continue
        first = r["R_inv"] if first is None else first
        lam = 0.8 * lam + 0.2 * max(0.15 * r["R_emp"], 0.05) / max(r["R_inv"], 1e-8, 0.1 * first)
        expected.append(lam)
    assert [r["lambda"] for r in steps] == pytest.approx(expected, rel=1e-5)
    assert steps[-1]["lambda"] > 0


def test_updated_hyperparameters_reach_the_objective_and_bad_input_exits_2(folder: Path) -> None:
    path = trace_run(folder, Rung.parse(RUNG), "dynamic_birm", 0, {"smooth": "risks"})
    assert path.name == "vlm_full_tiny_idefics3__dynamic_birm__0__smooth=risks.json"
    assert json.loads(path.read_text())["hparams"] == {"smooth": "risks"}
    assert main([str(folder), RUNG, "dynamic_birm", "0", "smooth=weights"]) == 2
    assert main([str(folder), "vlm:head:tiny:idefics3", "erm", "0"]) == 2
    assert main([str(folder), RUNG, "groupdro", "0"]) == 2
    assert main([str(folder), RUNG]) == 2
    assert main([str(folder), "vlm:frozen:tiny:idefics3", "erm", "0"]) == 2  # no such rung: one line, no traceback
