"""configs/paper/shortcut_aware_rm.yaml: validated with the paper's settings, and run end to end
as a smoke run; its dry run prints the plan; the matrix config's errors name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from robustvlm.cli import main
from robustvlm.errors import ConfigError
from robustvlm.workflows.reward.matrix import matrix_plan
from robustvlm.workflows.reward.matrix_smoke import smoke_matrix_spec

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "paper" / "shortcut_aware_rm.yaml"

torch.set_num_threads(1)


def test_recipe_validates_with_the_paper_settings():
    plan = matrix_plan(yaml.safe_load(RECIPE.read_text()))
    assert list(plan.losses) == ["standard", "text_only", "shortcut_aware"] and plan.text_only == "text_only"
    assert plan.losses["shortcut_aware"] == ("shortcut_aware", {"proxy": "copy", "text_mode": "blank"})
    povid = plan.run_config("shortcut_aware", 0, "povid")
    assert povid.model.name == "OpenGVLab/InternVL3-8B-hf" and povid.model.trainable == "paper"
    assert not povid.model.trust_remote_code
    assert set(povid.data.sources) == {"vlfeedback", "povid", "rlhf-v"} and povid.data.envs == ["povid"]
    assert povid.data.sources["povid"].format == "povid" and povid.data.max_length == 4096
    t = povid.train
    assert (t.epochs, t.lr, t.weight_decay, t.warmup_ratio, t.bf16) == (1, 1e-5, 0.05, 0.1, True)
    assert t.batch_size * t.grad_accum == 256
    rlhf = plan.run_config("standard", 0, "rlhf-v").train
    assert rlhf.batch_size * rlhf.grad_accum == 128


def test_smoke_run_from_the_cli(tmp_path, capsys):
    out = tmp_path / "smoke"
    assert main(["rm", "matrix", str(RECIPE), "--smoke", "--out", str(out)]) == 0
    assert "| shortcut_aware |" in capsys.readouterr().out
    results = json.loads((out / "matrix.json").read_text())
    assert results["train_envs"] == ["clause", "long"] and results["test_envs"] == ["clause", "long", "plain", "short"]
    assert set(results["cells"]["shortcut_aware"]) == {f"{a}->{b}" for a in ("clause", "long")
                                                       for b in ("clause", "long", "plain", "short")}
    assert set(results["sfd"]) == {"standard", "shortcut_aware"} and results["machine"]["torch"]["threads"] >= 1
    for label, check in results["swap"].items():  # every run passed the swap check
        assert check["runs"] == 2 and check["max_abs_difference"] == 0.0, label
    assert "## Swap check" in (out / "report.md").read_text()
    run = yaml.safe_load((out / "runs" / "shortcut_aware" / "seed-0" / "long" / "train.yaml").read_text())
    assert run["model"]["name"].endswith("bases/seed-0") and run["loss_args"]["text_mode"] == "blank"
    for name in ("report.md", "report.html", "matrix_heatmaps.png", "sfd.png"):
        assert (out / name).is_file(), name
    # a second run reuses every finished run
    mtimes = {p: p.stat().st_mtime for p in out.glob("runs/*/seed-0/*/train/final/model.safetensors")}
    assert main(["rm", "matrix", str(RECIPE), "--smoke", "--out", str(out)]) == 0
    assert mtimes == {p: p.stat().st_mtime for p in mtimes}


def test_matrix_config_errors_name_the_key():
    spec = yaml.safe_load(RECIPE.read_text())
    with pytest.raises(ConfigError, match=r"launch: unknown key"):
        matrix_plan({**spec, "launch": {}})
    with pytest.raises(ConfigError, match=r"losses\.bad\.loss: Field required"):
        matrix_plan({**spec, "losses": {"bad": {"proxy": "copy"}}})
    with pytest.raises(ConfigError, match="losses.sa: .*proxy must be one of"):
        matrix_plan({**spec, "losses": {"sa": {"loss": "shortcut_aware", "proxy": "twin"}}})
    with pytest.raises(ConfigError, match="train.lr"):
        matrix_plan({**spec, "base": {**spec["base"], "train": {"lr": "fast"}}})
    smoke = smoke_matrix_spec(spec)
    assert spec["base"]["model"]["name"] == "OpenGVLab/InternVL3-8B-hf"  # input untouched
    assert smoke["base"]["model"] == {"name": "tiny:idefics3", "trainable": "paper"}
    assert "per_env" not in smoke and smoke["seeds"] == [0] and smoke["base"]["train"]["lr"] == 1e-5


@pytest.mark.slow
def test_worker_processes_give_the_same_matrix_as_one_process(tmp_path):
    """`jobs: 2` runs through the job runner's process pool: the same matrix as one process."""
    from robustvlm.workflows.reward.matrix import run_matrix

    spec = smoke_matrix_spec(yaml.safe_load(RECIPE.read_text()))
    spec["losses"] = {k: v for k, v in spec["losses"].items() if k in ("standard", "text_only")}
    one = run_matrix(spec, tmp_path / "one").results.to_dict()
    two = run_matrix({**spec, "jobs": 2}, tmp_path / "two").results.to_dict()
    assert one["cells"]["standard"] and one == two


@pytest.mark.parametrize(("name", "steps", "envs"), [("matrix_long_400", 400, ["long"]),
                                                     ("matrix_cue70", 100, ["long", "short"]),
                                                     ("matrix_salient", 100, ["long", "plain"]),
                                                     ("matrix_salient_300", 300, ["long"])])
def test_ladder_follow_up_configs_are_the_demos_matrix_but_for_steps_and_envs(name, steps, envs):
    from robustvlm.experiments.reward.run import FULL, matrix_spec

    plan = matrix_plan(yaml.safe_load((RECIPE.parents[1] / "reward" / f"{name}.yaml").read_text()))
    demo = matrix_spec(Path("demo_reward/data"), Path("demo_reward/policy/train/final"), FULL)
    expected = {**demo["base"]["train"], "steps": steps, "save_every": steps}
    assert plan.base["train"] == expected and plan.train_envs == envs and plan.seeds == demo["seeds"]
    assert plan.base["model"] == demo["base"]["model"]
    assert plan.losses == {label: (spec["loss"], {k: v for k, v in spec.items() if k != "loss"})
                           for label, spec in demo["losses"].items()}
