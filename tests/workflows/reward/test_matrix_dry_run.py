"""`rm matrix --dry-run` prints the plan and trains nothing, loads neither model nor data (issue
46.4: it ran a smoke matrix); `--smoke` is the tiny real run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bad_input import run_cli

import robustvlm.workflows.reward.matrix as matrix
from robustvlm.configs import resolve


def _refuse(*args, **kwargs):
    raise AssertionError("a dry run trained or loaded something")


@pytest.fixture
def nothing_runs(tmp_path, monkeypatch):
    """Training, scoring, data loading and tiny-model building raise; cwd is an empty tmp_path."""
    for name in ("train_reward_model", "evaluate_reward_model", "load_pairs_from_config", "save_tiny_base",
                 "run_jobs"):
        monkeypatch.setattr(matrix, name, _refuse)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def plan_table(out: str) -> list[list[str]]:
    """The rows (header dropped) of the tab-separated table of a printed plan."""
    return [line.split("\t") for line in out.split("\n\n")[0].splitlines()[1:]]


def test_dry_run_of_the_paper_recipe_names_every_run_its_batch_and_model(nothing_runs, capsys):
    assert run_cli(["rm", "matrix", "configs/paper/shortcut_aware_rm.yaml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert list(nothing_runs.iterdir()) == [], "a dry run wrote files"
    spec = yaml.safe_load(Path(resolve("configs/paper/shortcut_aware_rm.yaml")).read_text())
    envs = list(spec["base"]["data"]["sources"])
    rows = plan_table(out)
    expected = [(label, str(seed), env) for label in spec["losses"] for seed in spec["seeds"] for env in envs]
    assert [tuple(r[:3]) for r in rows] == expected
    assert all(r[3] == spec["losses"][r[0]]["loss"] for r in rows)
    train = spec["base"]["train"]
    for r in rows:
        accum = spec["per_env"].get(r[2], {}).get("train", {}).get("grad_accum", train["grad_accum"])
        assert (r[4], r[5], r[6], r[7]) == (spec["base"]["model"]["name"], spec["base"]["model"]["trainable"],
                                            f"{train['epochs']} epochs", str(train["batch_size"] * accum))
        assert r[8].endswith(f"studies/shortcut_aware_rm/runs/{r[0]}/seed-{r[1]}/{r[2]}")
    assert {r[7] for r in rows if r[2] == "rlhf-v"} == {"128"} and {r[7] for r in rows if r[2] == "povid"} == {"256"}
    assert f"budget: {len(rows)} runs (3 losses x 1 seeds x 3 training environments), each counted in epochs" in out
    assert "nothing was trained" in out


def test_dry_run_counts_steps_and_examples_where_steps_are_fixed(nothing_runs, capsys):
    assert run_cli(["rm", "matrix", "configs/reward/matrix_mixed.yaml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    spec = yaml.safe_load(Path(resolve("configs/reward/matrix_mixed.yaml")).read_text())
    train = spec["base"]["train"]
    n = len(spec["losses"]) * len(spec["seeds"]) * len(spec["train_envs"])
    assert len(plan_table(out)) == n
    batch = train["batch_size"] * train.get("grad_accum", 1)
    assert f"{n * train['steps']:,} optimisation steps, {n * train['steps'] * batch:,} training examples" in out
    assert f"jobs: {spec.get('jobs', 1)} at a time" in out


def test_dry_run_of_the_smoke_run_and_of_data_without_named_environments(nothing_runs, capsys):
    assert run_cli(["rm", "matrix", "configs/paper/shortcut_aware_rm.yaml", "--dry-run", "--smoke"]) == 0
    rows = plan_table(capsys.readouterr().out)
    assert {(r[2], r[4], r[6]) for r in rows} == {(env, "tiny:idefics3", "3") for env in ("clause", "long")}
    spec = yaml.safe_load(Path(resolve("configs/paper/shortcut_aware_rm.yaml")).read_text())
    spec["base"]["data"] = {"benchmark": "preferences"}
    spec.pop("per_env")
    Path("m.yaml").write_text(yaml.safe_dump(spec))
    assert run_cli(["rm", "matrix", "m.yaml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert {r[2] for r in plan_table(out)} == {"<each env>"} and len(plan_table(out)) == 3
    assert "training environments: every one with training pairs, found when the data is read" in out
