"""Config loading: YAML + overrides, and errors that name the key."""

from pathlib import Path

import pytest
import yaml

from robustvlm.config import apply_overrides, load_config, validate_config
from robustvlm.errors import ConfigError
from robustvlm.runs import write_settings


def write(tmp_path, data):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_defaults_and_overrides(tmp_path):
    path = write(tmp_path, {"data": {"benchmark": "tasks"}, "train": {"lr": 1e-3}})
    cfg = load_config(path, ["train.batch_size=16", "method=vrex", "method_args.lambda=2.5"])
    assert cfg.train.lr == 1e-3 and cfg.train.batch_size == 16
    assert cfg.method == "vrex" and cfg.method_args == {"lambda": 2.5}
    assert cfg.eval.max_new_tokens == 128 and cfg.eval.repetition_penalty == 1.0
    assert cfg.model.trust_remote_code is False


def test_unknown_key_is_named(tmp_path):
    path = write(tmp_path, {"data": {"benchmark": "tasks"}, "train": {"learning_rate": 1e-3}})
    with pytest.raises(ConfigError, match=r"train\.learning_rate: unknown key"):
        load_config(path)


def test_wrong_type_is_named(tmp_path):
    path = write(tmp_path, {"data": {"benchmark": "tasks"}})
    with pytest.raises(ConfigError, match=r"train\.lr: .*'fast'"):
        load_config(path, ["train.lr=fast"])


def test_data_needs_exactly_one_source():
    with pytest.raises(ConfigError, match="exactly one of data.path or data.benchmark"):
        validate_config({"data": {"path": "x", "benchmark": "tasks"}})


def test_bad_override_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides({}, ["train.lr"])
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")


def test_resolved_config_round_trips(tmp_path):
    cfg = validate_config({"data": {"benchmark": "spurious"}, "method": "irm"})
    write_settings(cfg, tmp_path / "resolved.yaml")
    again = load_config(tmp_path / "resolved.yaml")
    assert again == cfg


def test_reward_config_reuses_the_sections_and_names_bad_keys(tmp_path):
    from robustvlm.config import RewardConfig, TrainConfig, load_config

    path = tmp_path / "rm.yaml"
    path.write_text("data: {benchmark: preferences}\nloss: shortcut_aware\n")
    cfg = load_config(path, ["loss_args.proxy=adapter", "model.trainable=lora"], RewardConfig)
    assert isinstance(cfg.train, TrainConfig) and cfg.train.lr == 1e-5 and cfg.train.weight_decay == 0.05
    assert cfg.train.sampler == "shuffle" and cfg.loss_args == {"proxy": "adapter"}
    path.write_text("data: {benchmark: preferences, sources: {a: {path: x}}}\n")
    with pytest.raises(ConfigError, match="give exactly one of data.path, data.benchmark or data.sources"):
        load_config(path, schema=RewardConfig)
    path.write_text("data: {sources: {a: {path: x, fmt: povid}}}\neval: {text_mode: grey}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, schema=RewardConfig)
    assert "data.sources.a.fmt: unknown key" in str(err.value) and "eval.text_mode" in str(err.value)


def test_embedding_configs_keep_the_vlm2vec_defaults_under_partial_sections(tmp_path):
    from robustvlm.config import EmbedRunConfig

    path = write(tmp_path, {"data": {"benchmark": "tasks"}, "model": {"name": "tiny:llava", "lora": {"r": 8}},
                            "train": {"lr": 1e-3}})
    cfg = load_config(path, ["embed.chunk_size=4"], EmbedRunConfig)
    assert (cfg.model.trainable, cfg.model.lora.r, cfg.model.lora.alpha, cfg.model.lora.dropout) == ("lora", 8, 64, 0.1)
    assert cfg.train.sampler == "shuffle" and cfg.embed.temperature == 0.02 and cfg.embed.chunk_size == 4
    with pytest.raises(ConfigError, match=r"embed.chunk_size: .*greater than or equal to 1"):
        load_config(path, ["embed.chunk_size=0"], EmbedRunConfig)
    with pytest.raises(ConfigError, match="query_template must hold"):
        load_config(path, ["embed.query_template=no slot"], EmbedRunConfig)


@pytest.mark.parametrize("name", ["vlm2vec_vqa", "vlm2vec_caption"])
def test_shipped_vlm2vec_recipes_validate(name):
    from robustvlm.config import EmbedRunConfig

    repo = Path(__file__).resolve().parents[1]
    cfg = load_config(repo / "configs" / "paper" / f"{name}.yaml", schema=EmbedRunConfig)
    assert cfg.embed.temperature == 0.02 and cfg.train.steps == 400 and cfg.model.lora.r == 4
