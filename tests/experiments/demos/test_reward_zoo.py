"""`demo reward --zoo --quick` on the quick zoo's Idefics3 member, end to end (slow: the quick zoo
is built in a temporary cache, then the variant runs), checked against independent
recomputation from the files the runs wrote."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from report_checks import assert_smoke_verdict_only, without_data_read

from robustvlm.analysis.sfc_steps import cue_side, read_sfc_pairs
from robustvlm.cli import main
from robustvlm.experiments.reward.results import RewardZooResults
from robustvlm.experiments.reward.zoo import QUICK_ZOO, run_zoo_reward
from robustvlm.figures.registry import OWN_TEST_FIGURES
from robustvlm.figures.write import render
from robustvlm.report.figure_blocks import read_figure
from robustvlm.runs import read_jsonl

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory, quick_zoo):
    cache = quick_zoo(QUICK_ZOO.member)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROBUSTVLM_CACHE", str(cache))
        out = tmp_path_factory.mktemp("reward_zoo")
        results = run_zoo_reward(out, quick=True)
    return out, results


@pytest.mark.slow
def test_results_round_trip_through_their_class(zoo_run):
    out, results = zoo_run
    raw = json.loads((out / "results.json").read_text())
    again = RewardZooResults.from_dict(raw)
    assert json.loads(json.dumps(again.to_dict())) == without_data_read(raw) == json.loads(json.dumps(results.to_dict()))
    assert again.plan == QUICK_ZOO and again.matrix.labels == ["standard", "text_only", "shortcut_aware"]
    assert set(again.linear.losses) == {"standard", "text_only", "shortcut_aware"}
    assert again.frozen.matrix.train_envs == again.matrix.train_envs == ["clause", "long", "plain", "short"]
    assert len(again.full_proxy.runs or []) == 4 and (out / "sfc_steps.png").is_file()
    assert "## The SFC weights step by step" in (out / "report.md").read_text()
    assert_smoke_verdict_only((out / "report.md").read_text(), f"Shortcut-aware reward models from zoo:{QUICK_ZOO.member}")


@pytest.mark.slow
def test_step_weights_are_the_runs_logged_pairs(zoo_run):
    """Each step's mean SFC on the cue-failing / cue-agreeing pairs, recomputed from every
    shortcut-aware run's sfc_pairs.jsonl and the data's cue labels; and each run's rows average
    to the SFC its train_log.jsonl logged for that step."""
    out, results = zoo_run
    records = [json.loads(line) for line in (out / "data" / "data.jsonl").read_text().splitlines()]
    side = {r["id"]: cue_side(r["env"], r["cue"]) for r in records}
    pooled: dict[tuple[int, str], list[float]] = defaultdict(list)
    for env in results.matrix.train_envs:
        run = out / "matrix" / "runs" / "shortcut_aware" / "seed-0" / env / "train"
        rows = read_sfc_pairs(run)
        assert {r["step"] for r in rows} == set(range(1, QUICK_ZOO.rm_steps + 1))
        for logged in read_jsonl(run / "train_log.jsonl"):
            mine = [r["sfc"] for r in rows if r["step"] == logged["step"]]
            assert np.mean(mine) == pytest.approx(logged["sfc"], rel=1e-5)
        for r in rows:
            if side[r["id"]] is not None:
                pooled[(r["step"], side[r["id"]])].append(r["sfc"])
    for entry in results.steps["all"]:
        for name in ("failing", "agreeing"):
            values = pooled.get((entry["step"], name), [])
            assert entry[name]["n"] == len(values)
            if values:
                assert entry[name]["sfc"] == pytest.approx(np.mean(values))
    assert results.steps["all"] == results.steps["seed-0"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in OWN_TEST_FIGURES if n.startswith("reward-zoo-")])
def test_quick_figures_in_the_docs_are_what_the_code_produces(zoo_run, name):
    out, _ = zoo_run
    documented = read_figure((ROOT / "docs" / "quick_figures.md").read_text(encoding="utf-8"), name)
    assert render(name, out) == documented, (
        f"docs/quick_figures.md's {name} table differs from what the code produces now; if the change "
        "is intended, rewrite it with `python -m robustvlm.figures`")


def test_an_unbuilt_member_is_named_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path / "cache"))
    assert main(["demo", "reward", "--zoo", "--quick", "--out", str(tmp_path / "out")]) == 2
    assert "zoo build" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
