"""configs/paper/dynamic_birm_smolvlm.yaml: validated, and run end to end as a smoke run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

import robustvlm.workflows.finetune.study as study
from robustvlm.cli import main
from robustvlm.errors import ConfigError
from robustvlm.training.launch import LaunchConfig, launch_command
from robustvlm.workflows.finetune.study_smoke import smoke_spec

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "paper" / "dynamic_birm_smolvlm.yaml"

torch.set_num_threads(1)


def test_recipe_validates_with_the_paper_settings():
    plan = study.study_runs(RECIPE)
    assert list(plan.runs) == ["erm", "birm", "dynamic_birm"] and plan.seeds == [0, 1, 2]
    assert plan.metrics == ["chrf", "bertscore", "cee"]
    cfg = plan.runs["dynamic_birm"][1]
    assert cfg.model.name == "HuggingFaceTB/SmolVLM-Base" and cfg.model.trainable == "paper"
    assert cfg.data.path == "hf:lmms-lab/LLaVA-OneVision-Data" and len(cfg.data.subsets) == 10
    envs = cfg.data.env_map["environments"]
    assert sorted(e for e, v in envs.items() if v.get("ood")) == ["ocr/rendered-text", "ocr/textocr"]
    assert {s for v in envs.values() for s in v["sources"]} == set(cfg.data.subsets)
    assert (cfg.data.split_per_env.train, cfg.data.split_per_env.test) == (400, 200)
    t = cfg.train
    assert (t.epochs, t.lr, t.batch_size, t.warmup_ratio, t.clip_norm, t.bf16) == (30, 3e-5, 4, 0.1, 1.0, True)
    # the paper's controller exactly: no floor on R_inv (robustvlm's default eps_rel is 0.1)
    assert cfg.method_args == {"seed": 1, "alpha": 0.8, "gamma": 0.15, "p_min": 0.05, "k_skip": 200, "eps_rel": 0.0}
    e = cfg.eval
    assert (e.max_new_tokens, e.repetition_penalty) == (128, 1.15)
    assert e.metrics == ["chrf", "exact", "bertscore", "cee"]
    assert e.judge.model == "Qwen/Qwen2.5-32B-Instruct" and e.judge.api_key_env == "JUDGE_API_KEY"
    launch = plan.launcher
    assert yaml.safe_load(Path(launch.accelerate_config).read_text())["deepspeed_config"]["zero_stage"] == 2


def test_smoke_spec_swaps_only_what_cannot_run_here():
    spec = yaml.safe_load(RECIPE.read_text())
    smoke = smoke_spec(spec)
    assert spec["base"]["model"]["name"] == "HuggingFaceTB/SmolVLM-Base"  # input untouched
    assert "launcher" not in smoke and smoke["seeds"] == [0] and smoke["metrics"] == spec["metrics"]
    assert smoke["base"]["model"] == {"name": "tiny:idefics3", "trainable": "paper"}
    assert smoke["base"]["data"] == {"benchmark": "tasks", "n_per_env": 8, "seed": 0,
                                   "split_per_env": {"train": 4, "test": 2}}
    assert smoke["base"]["train"]["lr"] == 3e-5 and smoke["base"]["train"]["steps"] == 4
    assert smoke["base"]["train"]["bf16"] == "auto"
    assert "judge" not in smoke["base"]["eval"] and smoke["base"]["eval"]["repetition_penalty"] == 1.15
    assert smoke["methods"]["dynamic_birm"]["k_skip"] == 2 and smoke["methods"]["dynamic_birm"]["gamma"] == 0.15
    assert smoke["methods"]["birm"]["anneal_steps"] == 2


def test_smoke_run_from_the_cli(tmp_path, capsys):
    out = tmp_path / "smoke"
    assert main(["study", str(RECIPE), "--smoke", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["smoke"] is True and "dry_run" not in results and results["seeds"] == [0]
    assert list(results["methods"]) == ["erm", "birm", "dynamic_birm"]
    assert set(results["absent"]) == {"cee"}
    for info in results["methods"].values():
        summary = info["summary"]
        assert summary["id"]["bertscore"]["n"] == 8 * 2 and summary["ood"]["chrf"]["n"] == 2 * 2
        assert summary["ood"]["cee"]["mean"] is None
    log = [json.loads(line) for line in (out / "runs" / "dynamic_birm" / "seed-0" / "train" / "train_log.jsonl").open()]
    assert len(log) == 4 and log[-1]["lambda"] > 0  # past the shortened k_skip: the penalty is on
    report = (out / "report.md").read_text()
    assert report.startswith("# Study dynamic_birm_smolvlm: quick run (a smoke test)") and "CEE: the smoke run calls no judge" in report


def test_launch_command():
    launch = LaunchConfig(accelerate_config="acc.yaml", num_processes=2)
    cmd = launch_command(launch, Path("r.yaml"), Path("out"))
    assert cmd[1:] == ["-m", "accelerate.commands.launch", "--config_file", "acc.yaml",
                       "--num_processes", "2", "-m", "robustvlm.cli", "train", "r.yaml",
                       "--out", "out", "--resume"]


def test_study_trains_through_accelerate_launch(tmp_path, monkeypatch):
    """`launcher` runs each training as an `accelerate launch` child; weights equal an in-process run."""
    accelerate_cfg = tmp_path / "cpu.yaml"
    accelerate_cfg.write_text(yaml.safe_dump({
        "compute_environment": "LOCAL_MACHINE", "distributed_type": "NO", "use_cpu": True,
        "mixed_precision": "no", "num_machines": 1, "num_processes": 1,
    }))
    spec = {
        "base": {
            "model": {"name": "tiny:idefics3", "trainable": "full", "tiny": {"hidden_size": 32, "vocab_size": 300}},
            "data": {"benchmark": "spurious", "n_per_env": 16},
            "train": {"steps": 3, "lr": 3e-3, "batch_size": 4, "save_every": 3, "cpu_threads": 1},
            "eval": {"max_new_tokens": 4, "max_per_env": 2},
        },
        "methods": {"erm": {"method": "erm"}},
        "metrics": ["chrf"],
        "launcher": {"accelerate_config": str(accelerate_cfg)},
    }
    launched = study.run_study(spec, tmp_path / "launched", progress=False).to_dict()
    spec.pop("launcher")
    in_process = study.run_study(spec, tmp_path / "in_process", progress=False).to_dict()
    assert launched["methods"]["erm"]["summary"] == in_process["methods"]["erm"]["summary"]
    final = [tmp_path / d / "runs" / "erm" / "seed-0" / "train" / "final" for d in ("launched", "in_process")]
    from safetensors.torch import load_file

    a, b = (load_file(next(f.glob("*.safetensors"))) for f in final)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "launched" / "runs" / "erm" / "seed-0" / "train.yaml").is_file()


@pytest.mark.parametrize("bad", [{"accelerate_config": 3}, {"config": "x"}])
def test_bad_launch_section_names_the_key(bad):
    spec = yaml.safe_load(RECIPE.read_text())
    spec["launcher"] = bad
    with pytest.raises(ConfigError, match="launcher"):
        study.study_runs(spec)


def test_the_old_launch_key_is_accepted_with_a_deprecation_message(capsys):
    spec = yaml.safe_load(RECIPE.read_text())
    spec["launch"] = spec.pop("launcher")
    assert study.study_runs(spec).launcher == study.study_runs(yaml.safe_load(RECIPE.read_text())).launcher
    assert "deprecated: study config: `launch:` is now called `launcher:`" in capsys.readouterr().err
    spec["launcher"] = spec["launch"]
    with pytest.raises(ConfigError, match="give `launcher` only"):
        study.study_runs(spec)
    assert "launch" not in smoke_spec(spec) and "launcher" not in smoke_spec(spec)
