"""The reward model: last-token reading, shared-prefix scoring equal to full sequences and to the
training batch, save/load with identical rewards, LoRA merging, two adapters side by side."""

from __future__ import annotations

import copy

import pytest
import torch
from reward_inputs import QUERY, RESPONSES

from robustvlm.data.collate import VLMCollator
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.answer import freeze_unused_lm_head, last_token_index
from robustvlm.models.backends import infer_family, load_backend
from robustvlm.models.reward import (
    RewardModel,
    candidate_rewards,
    load_reward_model,
    save_reward_model,
)
from robustvlm.models.trainable import add_adapter_copy, configure_trainable, use_adapter


def reward_model(tiny_vlms, kind: str) -> tuple[RewardModel, object]:
    vlm, processor = tiny_vlms(kind)
    torch.manual_seed(0)
    return RewardModel(copy.deepcopy(vlm)).eval(), processor


def test_last_token_index_with_either_padding_side():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 1, 1]])
    assert last_token_index(mask).tolist() == [2, 3, 3]


@pytest.mark.parametrize("kind", ["idefics3", "llava"])
def test_shared_prefix_equals_full_sequences_and_the_training_batch(tiny_vlms, image, kind, tmp_path):
    model, processor = reward_model(tiny_vlms, kind)
    shared = candidate_rewards(model, processor, QUERY, RESPONSES, image=image)
    full = candidate_rewards(model, processor, QUERY, RESPONSES, image=image, shared_prefix=False)
    assert shared == pytest.approx(full, abs=1e-5)
    image.save(tmp_path / "x.png")
    examples = [Example(str(i), str(tmp_path / "x.png"), QUERY, r, "e") for i, r in enumerate(RESPONSES)]
    with torch.no_grad():
        batch = model(VLMCollator(processor, {}, train=True)(examples)).tolist()
        left = model(VLMCollator(processor, {}, train=True, padding_side="left")(examples)).tolist()
    # the reward is read at each sequence's last real token, image tokens in the sequence, with
    # the padding on either side (the responses differ in length)
    assert batch == pytest.approx(shared, abs=1e-5)
    assert left == pytest.approx(shared, abs=1e-5)
    text_only = candidate_rewards(model, processor, QUERY, RESPONSES)
    assert text_only == pytest.approx(candidate_rewards(model, processor, QUERY, RESPONSES, shared_prefix=False),
                                      abs=1e-5)
    assert text_only != pytest.approx(shared, abs=1e-5)  # the image matters to the score


def test_save_and_load_give_identical_rewards_and_a_reward_backend(tiny_vlms, image, tmp_path):
    model, processor = reward_model(tiny_vlms, "idefics3")
    with torch.no_grad():
        model.head.weight.mul_(50)  # rewards far from zero, so equality is not trivial
    before = candidate_rewards(model, processor, QUERY, RESPONSES, image=image)
    save_reward_model(model, processor, tmp_path / "rm", meta={"loss": "standard"})
    loaded, loaded_processor = load_reward_model(tmp_path / "rm")
    assert candidate_rewards(loaded, loaded_processor, QUERY, RESPONSES, image=image) == before
    assert infer_family(ModelRef.folder(tmp_path / "rm")) == "reward"
    backend = load_backend(ModelRef.folder(tmp_path / "rm"))
    assert backend.meta["loss"] == "standard" and backend.rewards(QUERY, RESPONSES, image=image) == before
    with pytest.raises(ConfigError, match="does not support generate"):
        backend.generate({})
    with pytest.raises(ConfigError, match="not a reward model folder"):
        load_reward_model(tmp_path)


def test_lora_reward_model_saves_merged(tiny_vlms, image, tmp_path):
    vlm, processor = tiny_vlms("idefics3")
    peft = configure_trainable(copy.deepcopy(vlm), mode="lora", lora={"r": 4})
    model = RewardModel(peft).eval()
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # a trained-looking adapter (B starts at zero)
    before = candidate_rewards(model, processor, QUERY, RESPONSES, image=image)
    save_reward_model(model, processor, tmp_path / "rm")
    loaded, _ = load_reward_model(tmp_path / "rm")
    assert not any("lora" in name for name, _ in loaded.named_parameters())
    assert candidate_rewards(loaded, processor, QUERY, RESPONSES, image=image) == pytest.approx(before, abs=1e-4)


def test_unused_lm_head_is_frozen_unless_tied(tiny_vlms):
    vlm, _ = tiny_vlms("idefics3")
    model = copy.deepcopy(vlm)
    freeze_unused_lm_head(model)
    assert not model.lm_head.weight.requires_grad
    tied = copy.deepcopy(vlm)
    tied.lm_head.weight = tied.get_input_embeddings().weight
    freeze_unused_lm_head(tied)
    assert tied.lm_head.weight.requires_grad


def test_two_adapters_train_side_by_side(tiny_vlms, image):
    vlm, processor = tiny_vlms("idefics3")
    peft = configure_trainable(copy.deepcopy(vlm), mode="lora", lora={"r": 4})
    add_adapter_copy(peft, "proxy")
    params = dict(peft.named_parameters())
    proxy_names = [n for n in params if ".proxy." in n]
    assert proxy_names and all(params[n].requires_grad for n in proxy_names)
    assert all(torch.equal(params[n], params[n.replace(".proxy.", ".default.")]) for n in proxy_names)
    with torch.no_grad():
        for n in proxy_names:
            if "lora_B" in n:
                params[n].normal_(0, 0.5)
    main = RewardModel(peft, adapter="default")
    proxy = RewardModel(peft, head=copy.deepcopy(main.head), adapter="proxy")
    r_main = candidate_rewards(main, processor, QUERY, RESPONSES, image=image)
    r_proxy = candidate_rewards(proxy, processor, QUERY, RESPONSES, image=image)
    assert r_main != pytest.approx(r_proxy)  # each computes with its own adapter
    batch = VLMCollator(processor, {}, train=True)([Example("0", None, QUERY, RESPONSES[0], "e")])
    proxy(batch).sum().backward()
    grads = {n: p.grad for n, p in peft.named_parameters() if p.requires_grad}
    assert all(grads[n] is not None for n in proxy_names if "lora_A" in n)
    assert all(grads[n] is None for n in grads if ".default." in n)  # the main adapter is untouched
    with use_adapter(peft, "proxy"):
        assert all(m.active_adapters == ["proxy"] for m in peft.modules() if hasattr(m, "lora_A"))
    assert all(m.active_adapters == ["default"] for m in peft.modules() if hasattr(m, "lora_A"))
