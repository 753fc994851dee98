"""`robustvlm rm train` end to end, and exact resume after a real kill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kill_run import kill_after_first_checkpoint
from safetensors.torch import load_file

from robustvlm.cli import main
from robustvlm.config import RewardConfig, validate_config
from robustvlm.errors import ConfigError
from robustvlm.workflows.reward.train import train_reward_model

RAW = {
    "model": {"name": "tiny:idefics3", "trainable": "full", "tiny": {"hidden_size": 32, "vocab_size": 300}},
    "data": {"benchmark": "preferences", "n_per_env": 8, "envs": ["clause", "short"]},
    "loss": "shortcut_aware",
    "train": {"steps": 24, "lr": 1e-3, "batch_size": 4, "save_every": 3, "keep_checkpoints": 3, "cpu_threads": 1},
}


def weights(run: Path) -> dict:
    return {**load_file(str(run / "final" / "model.safetensors")),
            **{f"head.{k}": v for k, v in load_file(str(run / "final" / "reward_head.safetensors")).items()}}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run = tmp_path_factory.mktemp("rm_full")
    train_reward_model(validate_config(RAW, "t", RewardConfig), run, progress=False)
    return run


def test_resume_after_kill_matches_the_uninterrupted_run(uninterrupted, tmp_path):
    config = tmp_path / "rm.yaml"
    config.write_text(yaml.safe_dump(RAW))
    run = tmp_path / "killed"
    killed_at = kill_after_first_checkpoint(["rm", "train", str(config), "--out", str(run)], run)
    assert not (run / "final").exists(), "the run finished before it could be killed"
    assert killed_at < 24

    with pytest.raises(ConfigError, match="--resume"):
        train_reward_model(validate_config(RAW, "t", RewardConfig), run, progress=False)
    assert main(["rm", "train", str(config), "--out", str(run), "--resume"]) == 0
    a, b = weights(uninterrupted), weights(run)
    assert a.keys() == b.keys()
    for name in a:
        assert (a[name] == b[name]).all(), f"{name} differs after resume"
    strip = lambda path: [{k: v for k, v in json.loads(x).items() if k != "seconds"}  # noqa: E731
                          for x in (path / "train_log.jsonl").read_text().splitlines()]
    assert strip(run) == strip(uninterrupted)


def test_resume_refuses_other_data(uninterrupted, tmp_path):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(uninterrupted, run)
    other = {**RAW, "data": {**RAW["data"], "envs": ["clause"]}}
    with pytest.raises(ConfigError, match=r"differs in \['data.envs'\]"):
        train_reward_model(validate_config(other, "t", RewardConfig), run, resume=True, progress=False)


def test_bad_reward_config_is_one_line_error(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("data: {benchmark: preferences}\nloss: dpo\n")
    assert main(["rm", "train", str(cfg), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "loss: unknown reward loss 'dpo'" in err and "Traceback" not in err
    cfg.write_text("data: {benchmark: preferences}\ntrain: {lr: fast}\n")
    assert main(["rm", "train", str(cfg), "--out", str(tmp_path / "run2")]) == 2
    assert "train.lr" in capsys.readouterr().err


def test_trains_on_several_sources_each_its_own_environment(tmp_path):
    from robustvlm.data.synth import synthesize

    folder = tmp_path / "prefs"
    synthesize("preferences", folder, n_per_env=8)
    rows = [json.loads(line) for line in (folder / "data.jsonl").read_text().splitlines()]
    sources = {}
    for env in ("clause", "short"):
        path = folder / f"{env}.jsonl"
        path.write_text("".join(json.dumps({**r, "env": None}) + "\n" for r in rows if r["env"] == env))
        sources[f"src-{env}"] = {"path": str(path), "format": "preference"}
    raw = {**RAW, "loss": "standard", "data": {"sources": sources},
           "train": {**RAW["train"], "steps": 2, "save_every": 2}}
    result = train_reward_model(validate_config(raw, "t", RewardConfig), tmp_path / "run", progress=False)
    assert result.env_names == ["src-clause", "src-short"]
    assert (result.final_dir / "reward_head.safetensors").is_file()


@pytest.mark.parametrize("name", ["standard", "text_only", "shortcut_aware", "rlaif_v"])
def test_example_reward_configs_validate(name):
    """Each example config in configs/reward/ is a valid reward config with the loss it names."""
    from pathlib import Path

    from robustvlm.config import RewardConfig, load_config

    root = Path(__file__).resolve().parents[3] / "configs" / "reward"
    cfg = load_config(root / f"{name}.yaml", schema=RewardConfig)
    assert cfg.loss == ("shortcut_aware" if name == "rlaif_v" else name)
