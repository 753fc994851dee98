"""`sweep --dry-run` prints the plan and trains nothing, loads no data (issue 46.4: it ran a smoke
sweep); `--smoke` is the tiny real run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bad_input import run_cli

import robustvlm.workflows.finetune.sweep as sweep
from robustvlm.configs import resolve
from robustvlm.objectives.search import draw_hparams


def _refuse(*args, **kwargs):
    raise AssertionError("a dry run trained or loaded something")


@pytest.fixture
def nothing_runs(tmp_path, monkeypatch):
    """Training, evaluation and data loading raise; the working folder is an empty tmp_path."""
    for name in ("train", "evaluate", "load_from_config", "run_jobs"):
        monkeypatch.setattr(sweep, name, _refuse)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def plan_table(out: str) -> list[list[str]]:
    """The rows (header dropped) of the first tab-separated table of a printed plan."""
    lines = out.split("\n\n")[0].splitlines()
    return [line.split("\t") for line in lines[1:]]


def test_dry_run_prints_every_run_with_its_steps_and_model(nothing_runs, capsys):
    assert run_cli(["sweep", "configs/sweep_spurious.yaml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert list(nothing_runs.iterdir()) == [], "a dry run wrote files"
    spec = yaml.safe_load(Path(resolve("configs/sweep_spurious.yaml")).read_text())
    train = spec["base"]["train"]
    rows = plan_table(out)
    expected = {(label, str(draw), str(seed)) for label in spec["methods"]
                for draw in range(spec["n_draws"]) for seed in spec["seeds"]}
    assert {tuple(r[:3]) for r in rows} == expected and len(rows) == len(expected)
    assert {r[3] for r in rows if r[0] == "irm"} == {spec["methods"]["irm"]["method"]}
    assert {(r[4], r[5], r[6], r[7]) for r in rows} == {
        (spec["base"]["model"]["name"], spec["base"]["model"]["trainable"], str(train["steps"]), str(train["batch_size"]))}
    assert all(r[8].endswith(f"sweeps/sweep_spurious/runs/{r[0]}/draw-{r[1]}/seed-{r[2]}") for r in rows)
    n = len(expected)
    assert (f"budget: {n} runs ({len(spec['methods'])} methods x {spec['n_draws']} draws x {len(spec['seeds'])} seeds), "
            f"{n * train['steps']:,} optimisation steps, {n * train['steps'] * train['batch_size']:,} training "
            "examples") in out
    every = spec["checkpoint_every"]
    assert f"checkpoints evaluated: steps {list(range(every, train['steps'] + 1, every))}" in out
    assert "launcher: multi-gpu, 2 workers" in out and "nothing was trained" in out


def test_each_draws_hyperparameters_are_the_samplers(nothing_runs, capsys):
    assert run_cli(["sweep", "configs/sweep_spurious.yaml", "--dry-run"]) == 0
    draws = [line.split("\t") for line in capsys.readouterr().out.split("\n\n")[1].splitlines()[1:]]
    spec = yaml.safe_load(Path(resolve("configs/sweep_spurious.yaml")).read_text())
    train = spec["base"]["train"]
    assert len(draws) == len(spec["methods"]) * spec["n_draws"]
    for label, draw, lr, weight_decay, _ in draws:
        drawn = draw_hparams(spec["methods"][label]["method"], int(draw), steps=train["steps"],
                             optimizer_defaults={"lr": train["lr"], "weight_decay": 0.0},
                             optimizer_search={k: tuple(v) for k, v in spec["search"].items()})
        assert (float(lr), float(weight_decay)) == pytest.approx((drawn["lr"], drawn["weight_decay"]), rel=5e-3)


def test_dry_run_of_the_smoke_run_shows_its_tiny_plan(nothing_runs, capsys):
    assert run_cli(["sweep", "configs/sweep_spurious.yaml", "--dry-run", "--smoke"]) == 0
    rows = plan_table(capsys.readouterr().out)
    assert {(r[1], r[2]) for r in rows} == {("0", "0"), ("1", "0")}  # two draws, the first seed
    assert {(r[4], r[6]) for r in rows} == {("tiny:idefics3", "4")}
    assert all("/sweeps/sweep_spurious-smoke/" in r[8] for r in rows)
