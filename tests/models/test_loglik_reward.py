"""The log-likelihood reward (`LoglikReward`): equal to a manual forward + log-softmax + gather
over the reply tokens, the same on a training batch, a shared prefix and full sequences, summed or
length-normalised; gradients reach the LM head and the decoder; save/load keeps the rewards."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from PIL import Image
from reward_inputs import QUERY, RESPONSES

from robustvlm.data.collate import VLMCollator
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import infer_family, load_backend
from robustvlm.models.reward import (
    META_FILE,
    LoglikReward,
    candidate_rewards,
    load_reward_model,
    reward_kind,
    save_reward_model,
)


@pytest.fixture(scope="module")
def image_file(tmp_path_factory, image):
    path = tmp_path_factory.mktemp("img") / "x.png"
    image.save(path)
    return path


def manual_logliks(vlm, batch) -> tuple[list[float], list[float]]:
    """(sums, means) of each row's labelled tokens' log-probabilities, from the model's own logits."""
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "env", "ids")}
    with torch.no_grad():
        logits = vlm(**inputs, use_cache=False).logits.float()
    sums, means = [], []
    for row in range(logits.shape[0]):
        labels = batch["labels"][row]
        positions = [t for t in range(1, labels.shape[0]) if labels[t] != -100]
        values = [torch.log_softmax(logits[row, t - 1], dim=-1)[labels[t]].item() for t in positions]
        sums.append(sum(values))
        means.append(sum(values) / len(values))
    return sums, means


@pytest.mark.parametrize("kind", ["idefics3", "llava"])
def test_loglik_reward_equals_a_manual_loglik_on_every_path(tiny_vlms, image_file, kind):
    vlm, processor = tiny_vlms(kind)
    vlm = copy.deepcopy(vlm).eval()
    examples = [Example(str(i), str(image_file), QUERY, r, "e") for i, r in enumerate(RESPONSES)]
    batch = VLMCollator(processor, {}, train=True)(examples)
    sums, means = manual_logliks(vlm, batch)
    image = Image.open(image_file).convert("RGB")
    for normalize, expected in ((True, means), (False, sums)):
        model = LoglikReward(vlm, normalize=normalize).eval()
        with torch.no_grad():
            assert model(batch).tolist() == pytest.approx(expected, abs=1e-4)
        assert candidate_rewards(model, processor, QUERY, RESPONSES, image=image) == pytest.approx(expected, abs=1e-4)
        full = candidate_rewards(model, processor, QUERY, RESPONSES, image=image, shared_prefix=False)
        assert full == pytest.approx(expected, abs=1e-4)
    assert sums != pytest.approx(means, abs=1e-3)  # the responses differ in length
    text_only = candidate_rewards(LoglikReward(vlm), processor, QUERY, RESPONSES)
    assert text_only != pytest.approx(means, abs=1e-4)  # the picture matters to the reward


def test_gradients_reach_the_lm_head_and_the_decoder(tiny_vlms, image_file):
    vlm, processor = tiny_vlms("idefics3")
    model = LoglikReward(copy.deepcopy(vlm))
    batch = VLMCollator(processor, {}, train=True)([Example("0", str(image_file), QUERY, RESPONSES[1], "e")])
    model(batch).sum().backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert grads["vlm.lm_head.weight"] is not None and grads["vlm.lm_head.weight"].abs().sum() > 0
    decoder = [g for n, g in grads.items() if "text_model.layers" in n and g is not None]
    assert decoder and all(torch.isfinite(g).all() for g in decoder) and any(g.abs().sum() > 0 for g in decoder)


def test_save_and_load_keep_the_loglik_reward(tiny_vlms, image_file, tmp_path):
    vlm, processor = tiny_vlms("idefics3")
    model = LoglikReward(copy.deepcopy(vlm), normalize=False).eval()
    image = Image.open(image_file).convert("RGB")
    before = candidate_rewards(model, processor, QUERY, RESPONSES, image=image)
    save_reward_model(model, processor, tmp_path / "rm", meta={"loss": "standard"})
    assert not (tmp_path / "rm" / "reward_head.safetensors").exists()
    assert reward_kind(tmp_path / "rm") == "loglik_sum"
    loaded, loaded_processor = load_reward_model(tmp_path / "rm")
    assert isinstance(loaded, LoglikReward) and not loaded.normalize
    assert candidate_rewards(loaded, loaded_processor, QUERY, RESPONSES, image=image) == pytest.approx(before, abs=1e-5)
    assert infer_family(ModelRef.folder(tmp_path / "rm")) == "reward"
    assert load_backend(ModelRef.folder(tmp_path / "rm")).rewards(QUERY, RESPONSES, image=image) == pytest.approx(before, abs=1e-5)
    meta = json.loads((tmp_path / "rm" / META_FILE).read_text())
    (tmp_path / "rm" / META_FILE).write_text(json.dumps({**meta, "reward": "nonsense"}))
    with pytest.raises(ConfigError, match="unknown reward 'nonsense'"):
        load_reward_model(tmp_path / "rm")
