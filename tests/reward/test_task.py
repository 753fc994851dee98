"""Reward training through the one training loop: each loss trains, logs what it should and
saves only the main branch; the adapter proxy trains both adapters."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from robustvlm.config import RewardConfig, validate_config
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.reward import load_reward_model
from robustvlm.reward.task import RewardTask
from robustvlm.workflows.reward.train import train_reward_model

TINY = {"hidden_size": 32, "vocab_size": 300}


def config(loss: str, **overrides) -> RewardConfig:
    raw = {
        "model": {"name": "tiny:idefics3", "trainable": "full", "tiny": TINY},
        "data": {"benchmark": "preferences", "n_per_env": 8},
        "loss": loss,
        "train": {"steps": 3, "lr": 1e-3, "batch_size": 4, "save_every": 3, "cpu_threads": 1},
    }
    for key, value in overrides.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return validate_config(raw, "test", RewardConfig)


def log_rows(run):
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("loss", ["standard", "text_only"])
def test_single_branch_losses_train_and_save(loss, tmp_path):
    result = train_reward_model(config(loss, data={"envs": ["long", "plain"]}), tmp_path, progress=False)
    assert result.env_names == ["long", "plain"]
    rows = log_rows(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3] and {"loss", "acc", "reward_gap", "grad_norm", "lr"} <= set(rows[0])
    meta = json.loads((result.final_dir / "reward_model.json").read_text())
    assert meta["loss"] == loss and meta["trained_on"] == ["long", "plain"]
    model, _ = load_reward_model(result.final_dir)
    assert model.head.weight.shape == (1, 32)


def test_shortcut_aware_copy_logs_sfc_per_env_and_saves_only_the_main_branch(tmp_path):
    cfg = config("shortcut_aware", train={"batch_size": 4, "sampler": "balanced"})
    result = train_reward_model(cfg, tmp_path, progress=False)
    rows = log_rows(tmp_path)
    assert {"loss_proxy", "acc_proxy", "sfc"} <= set(rows[0])
    assert all(0 < r["sfc"] < 1 for r in rows)
    assert {k for r in rows for k in r if k.startswith("sfc/")} <= {f"sfc/{e}" for e in ("clause", "long", "plain", "short")}
    assert any(k.startswith("sfc/") for k in rows[0])
    assert {"sfc_dist/proxy_wrong", "sfc_dist/above_half", "sfc_dist/weight_proxy_wrong"} <= set(rows[0])
    assert all(r["sfc_dist/proxy_wrong"] == pytest.approx(1 - r["acc_proxy"]) for r in rows)
    checkpoint = load_file(str(tmp_path / "checkpoints" / "step-000003" / "model_1.safetensors"))
    assert checkpoint  # the proxy is checkpointed (it resumes too) ...
    saved = load_file(str(result.final_dir / "model.safetensors"))
    assert not any("proxy" in k for k in saved)  # ... but only the main branch is saved for inference
    assert load_file(str(result.final_dir / "reward_head.safetensors"))["weight"].shape == (1, 32)


def test_adapter_proxy_trains_both_adapters_on_one_frozen_base(tmp_path):
    cfg = config("shortcut_aware", model={"trainable": "lora", "lora": {"r": 4}}, loss_args={"proxy": "adapter"})
    task = RewardTask(cfg)
    result = train_reward_model(cfg, tmp_path, progress=False)
    assert {"loss_proxy", "sfc"} <= set(log_rows(tmp_path)[0])
    model, _ = load_reward_model(result.final_dir)
    assert not any("lora" in n for n, _ in model.named_parameters())
    with pytest.raises(ConfigError, match="needs model.trainable: lora"):
        RewardTask(config("shortcut_aware", loss_args={"proxy": "adapter"}))
    assert task.adapter_proxy


def test_adapter_step_gradients_equal_the_summed_objective(tmp_path):
    """The adapter proxy's step (two backward passes, each inside its adapter) gives the gradients
    of the SFC-weighted main loss plus the proxy's own loss, computed in one graph."""
    from robustvlm.training.loop import make_accelerator
    from robustvlm.training.task import SetupContext, StepContext

    cfg = config("shortcut_aware", model={"trainable": "lora", "lora": {"r": 4, "dropout": 0.0}},
                 loss_args={"proxy": "adapter"})
    task = RewardTask(cfg)
    task.prepare_files(tmp_path)
    accelerator = make_accelerator(cfg.train, tmp_path)
    setup = task.setup(SetupContext(tmp_path, accelerator, 4, False))
    branches = setup.models["reward"]
    with torch.no_grad():
        for n, p in branches.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    batch = setup.collate(next(iter(setup.sampler)))
    task.training_step(batch, StepContext(0, setup.models, accelerator, 1, True))
    grads = {n: p.grad.clone() for n, p in branches.named_parameters() if p.grad is not None}
    assert any(".proxy." in n for n in grads) and any(".default." in n for n in grads)
    for p in branches.parameters():
        p.grad = None
    from robustvlm.reward.losses import branch_objective, pair_losses, shortcut_failure_coefficient

    r_text = branches(batch["text"], branch="proxy")
    r_main = branches(batch["multimodal"], branch="main")
    c_t, j_t, l_t = pair_losses(r_text, batch["margin"], task.hp)
    c_m, j_m, l_m = pair_losses(r_main, batch["margin"], task.hp)
    total = branch_objective(c_m, j_m, l_m, task.hp, weights=shortcut_failure_coefficient(l_m, l_t))
    total = total + branch_objective(c_t, j_t, l_t, task.hp)
    total.backward()  # one backward of the summed losses: no gradient checkpointing here
    for n, p in branches.named_parameters():
        if n in grads:
            assert torch.allclose(grads[n], p.grad, atol=1e-6), n


@pytest.mark.parametrize("proxy", ["copy", "adapter"])
def test_branches_are_clipped_apart(proxy, tmp_path):
    """The main branch and the proxy are two clip groups holding every trainable parameter
    exactly once: the proxy's group is the proxy model (copy) or its adapter and head (adapter)."""
    from robustvlm.reward.task import PROXY_ADAPTER
    from robustvlm.training.loop import make_accelerator
    from robustvlm.training.task import SetupContext

    model = {"trainable": "lora", "lora": {"r": 4}} if proxy == "adapter" else {}
    cfg = config("shortcut_aware", model=model, loss_args={"proxy": proxy})
    task = RewardTask(cfg)
    task.prepare_files(tmp_path)
    setup = task.setup(SetupContext(tmp_path, make_accelerator(cfg.train, tmp_path), 4, False))
    main, side = setup.clip_groups(setup.models)
    names = {id(p): n for m in setup.models.values() for n, p in m.named_parameters()}
    trainable = [p for m in setup.models.values() for p in m.parameters() if p.requires_grad]
    assert sorted(map(id, main + side)) == sorted(map(id, trainable))
    if proxy == "copy":
        assert {id(p) for p in side} == {id(p) for p in setup.models["proxy"].parameters() if p.requires_grad}
    else:
        assert all(names[id(p)].startswith("proxy.head") or f"lora_A.{PROXY_ADAPTER}." in names[id(p)]
                   or f"lora_B.{PROXY_ADAPTER}." in names[id(p)] for p in side)
        assert not any(PROXY_ADAPTER in names[id(p)] for p in main)
    assert RewardTask(config("standard")).spec.proxy is False


def test_drop_mode_freezes_everything_the_text_never_reaches(tiny_vlms):
    """Only the text decoder and LM head train on text-only inputs, LLaVA-OneVision's
    wrapper-level image_newline included among the frozen."""
    import copy

    from robustvlm.models.trainable import find_parts
    from robustvlm.reward.task import freeze_vision_side

    vlm = copy.deepcopy(tiny_vlms("llava_onevision")[0])
    freeze_vision_side(vlm)
    parts = find_parts(vlm)
    text = {id(p) for module in (parts.decoder, parts.lm_head) for p in module.parameters()}
    assert {id(p) for p in vlm.parameters() if p.requires_grad} == text
    assert not vlm.model.image_newline.requires_grad and not any(p.requires_grad for p in parts.vision.parameters())


def test_init_from_starts_every_branch_from_the_saved_reward_model(tmp_path):
    warm = train_reward_model(config("standard"), tmp_path / "warm", progress=False).final_dir
    saved_head = load_file(str(warm / "reward_head.safetensors"))["weight"]
    saved = load_file(str(warm / "model.safetensors"))
    # lr 0: the run's weights stay those it loaded, so its checkpoint shows what it started from
    cfg = config("shortcut_aware", init_from=str(warm), train={"lr": 0.0, "weight_decay": 0.0})
    result = train_reward_model(cfg, tmp_path / "run", progress=False)
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000003"
    for name in ("model.safetensors", "model_1.safetensors"):  # main branch, proxy
        state = load_file(str(checkpoint / name))
        assert torch.equal(state.pop("head.weight"), saved_head) and state
        for key, value in state.items():  # the proxy's checkpoint holds its text side only
            assert torch.equal(value, saved[key.removeprefix("vlm.")]), key
    assert torch.equal(load_file(str(result.final_dir / "reward_head.safetensors"))["weight"], saved_head)


def test_init_from_must_be_a_reward_model_folder(tmp_path):
    with pytest.raises(ConfigError, match="init_from"):
        train_reward_model(config("standard", init_from=str(tmp_path / "nothing")), tmp_path / "run", progress=False)


def test_the_matrix_smoke_run_drops_a_warm_start():
    from robustvlm.workflows.reward.matrix_smoke import smoke_matrix_spec

    spec = {"base": {"model": {"name": "m"}, "init_from": "runs/warm/final"}, "losses": {"standard": {}}}
    assert "init_from" not in smoke_matrix_spec(spec)["base"]


def test_loglik_reward_starts_as_the_vlms_own_loglik_and_saves_without_a_head(tmp_path):
    """`reward: loglik`: at step 1 (before any update) the main branch's reward gap of each pair is
    the base VLM's log-likelihood gap with the picture, the proxy's the gap without it; the run
    saves a LoglikReward (no head file)."""
    from robustvlm.analysis.sfc_steps import read_sfc_pairs
    from robustvlm.data.preferences import load_pairs_from_config
    from robustvlm.models.loading import load_vlm
    from robustvlm.models.reward import LoglikReward, candidate_rewards
    from robustvlm.reward.scoring import view_image

    cfg = config("shortcut_aware", reward="loglik", train={"sampler": "balanced"})
    result = train_reward_model(cfg, tmp_path, progress=False)
    vlm, processor = load_vlm(ModelRef.folder(tmp_path / "base"))
    base = LoglikReward(vlm).eval()
    pairs = {p.id: p for p in load_pairs_from_config(cfg.data, tmp_path, verbose=False).pairs}
    first = [row for row in read_sfc_pairs(tmp_path) if row["step"] == 1]
    assert len(first) == 4
    for row in first:
        pair = pairs[row["id"]]
        image = view_image(pair.image, "multimodal", source=pair.source, record=pair.id)
        with_image = candidate_rewards(base, processor, pair.query, [pair.chosen, pair.rejected], image=image)
        text = candidate_rewards(base, processor, pair.query, [pair.chosen, pair.rejected])
        assert row["main"] == pytest.approx(with_image[0] - with_image[1], abs=1e-4)
        assert row["proxy"] == pytest.approx(text[0] - text[1], abs=1e-4)
    assert not (result.final_dir / "reward_head.safetensors").exists()
    model, _ = load_reward_model(result.final_dir)
    assert isinstance(model, LoglikReward) and model.normalize


def test_loglik_reward_refuses_a_head_it_would_not_use(tmp_path):
    with pytest.raises(ConfigError, match="reward: loglik"):
        RewardTask(config("shortcut_aware", reward="loglik", model={"trainable": "lora"},
                          loss_args={"proxy": "adapter"}))
