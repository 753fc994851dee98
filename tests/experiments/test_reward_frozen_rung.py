"""The reward ladder's second rung (`experiments.reward.frozen_rung`) and the SFC read-outs of every rung: the
frozen heads against the hidden states the reward model scores, the linear trainer's proxy and SFC
against independent computations, and why the weights do not move to the shortcut's failures."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from PIL import Image

from robustvlm.analysis.reward import logged_sfc, sfc_distribution
from robustvlm.data.preferences import PreferencePair
from robustvlm.experiments.reward.frozen_rung import frozen_rung, pair_states
from robustvlm.experiments.reward.linear_rung import LinearPrefs, train_linear_rewards
from robustvlm.models.reward import RewardModel, candidate_rewards

TEXT_ONLY = np.array([0.0, 1.0])


def test_sfc_distribution_by_hand():
    d = sfc_distribution([0.2, 0.6, 0.8, 0.4], [True, True, False, False])
    assert d["mean"] == pytest.approx(0.5) and d["above_half"] == 0.5 and d["proxy_wrong"] == 0.5
    assert d["mean_proxy_wrong"] == pytest.approx(0.6) and d["mean_proxy_right"] == pytest.approx(0.4)
    assert d["weight_proxy_wrong"] == pytest.approx(1.2 / 2.0)
    assert sfc_distribution([0.3], [True])["mean_proxy_wrong"] is None


def test_logged_sfc_reads_the_second_half_of_each_run():
    run = [{"step": s, "acc_proxy": a, "sfc": 0.5, "sfc_dist/proxy_wrong": 1 - a} for s, a in ((5, 0.0), (10, 0.5), (15, 1.0), (20, 0.75))]
    out = logged_sfc([run, run[:2]])  # second run: steps 5, 10 -> keeps step 10
    assert out["train_accuracy"] == pytest.approx(np.mean([1.0, 0.75, 0.5]))
    assert out["sfc"]["proxy_wrong"] == pytest.approx(np.mean([0.0, 0.25, 0.5]))
    assert out["sfc"]["mean_proxy_wrong"] is None


def test_the_proxy_is_the_text_only_model_and_sfc_is_the_loss_ratio():
    """The proxy trains on its own plain loss from the same start and batches as the text-only
    model, so the two are equal; SFC = L_t / (L + L_t) from the final weights (numpy)."""
    prefs = LinearPrefs.draw(200, text_agreement=0.9, seed=1)
    text = prefs.features * TEXT_ONLY
    fits = train_linear_rewards(prefs.features, text, steps=40, batch_size=16, seed=3)
    np.testing.assert_allclose(fits["proxy"], fits["text_only"], rtol=1e-12)
    main = np.logaddexp(0, -(prefs.features @ fits["shortcut_aware"]))
    proxy = np.logaddexp(0, -(text @ fits["proxy"]))
    np.testing.assert_allclose(fits["sfc"], proxy / (main + proxy), rtol=1e-10)
    assert not np.allclose(fits["standard"], 0)  # trained from the head's random start


def test_sfc_moves_weight_to_the_shortcuts_failures_only_where_the_image_beats_the_proxy():
    """The cause the ladder shows: SFC_i = L_t,i / (L_i + L_t,i) exceeds 1/2 only where the main
    branch ranks a pair better than the text-only proxy. Where the shortcut fails and the main
    branch has learned the same cue (no usable image signal), both losses are high and the
    weight stays near 1/2, and pairs where the main branch is more confident than the proxy get
    more: the weighting does not favour the failures. With an image signal (rung 1) it does."""
    shares = {}
    for image_mean in (0.0, 0.5):
        prefs = LinearPrefs.draw(1000, text_agreement=0.9, image_mean=image_mean, seed=0)
        text = prefs.features * TEXT_ONLY
        fits = train_linear_rewards(prefs.features, text, steps=300)
        shares[image_mean] = sfc_distribution(fits["sfc"], text @ fits["proxy"] > 0)
    blind, seeing = shares[0.0], shares[0.5]
    assert blind["mean_proxy_wrong"] == pytest.approx(0.5, abs=0.01)
    assert blind["weight_proxy_wrong"] == pytest.approx(blind["proxy_wrong"], abs=0.005)
    assert seeing["mean_proxy_wrong"] > seeing["mean_proxy_right"] + 0.05
    assert seeing["weight_proxy_wrong"] > seeing["proxy_wrong"] + 0.01


def _pairs(n_train: int, n_test: int) -> list[PreferencePair]:
    pairs = []
    for env in ("a", "b"):
        for split, n in (("train", n_train), ("test", n_test)):
            pairs += [PreferencePair(f"{env}{split}{i}", "img.png", "q", f"c{i}", f"r{i}", env, split) for i in range(n)]
    return pairs


def test_frozen_rung_scores_each_head_on_the_test_states():
    """Synthetic states [n, 2, 2]: dimension 0 an image signal, dimension 1 a cue that agrees in
    environment a and disagrees in b; the text-only view has no image dimension. Each cell's
    accuracy equals the head trained directly on that environment, scored in numpy."""
    rng = np.random.default_rng(0)
    pairs = _pairs(60, 20)
    cue = np.array([1.0 if p.env == "a" else -1.0 for p in pairs])
    chosen = np.stack([rng.normal(0.5, 1.0, len(pairs)), cue], axis=1)
    states = {"multimodal": np.stack([chosen, np.zeros_like(chosen)], axis=1)}
    states["drop"] = states["multimodal"] * TEXT_ONLY
    out = frozen_rung(pairs, states, (0,), steps=30, batch_size=8, lr=0.05)
    matrix = out.matrix
    assert matrix.train_envs == ["a", "b"] and matrix.sfd_cells["standard"]["cells"] == [2]
    train_a = [i for i, p in enumerate(pairs) if p.env == "a" and p.split == "train"]
    test_b = [i for i, p in enumerate(pairs) if p.env == "b" and p.split == "test"]
    diff = {v: s[:, 0] - s[:, 1] for v, s in states.items()}
    fits = train_linear_rewards(diff["multimodal"][train_a], diff["drop"][train_a], steps=30, batch_size=8, lr=0.05, seed=0)
    for label, view in (("standard", "multimodal"), ("text_only", "drop")):
        expected = float(np.mean(diff[view][test_b] @ fits[label] > 0))
        assert matrix.cells[label]["a->b"]["mean"] == pytest.approx(expected)
    assert out.proxy.train_accuracy[0] == pytest.approx(1.0)  # the cue holds in training


def test_pair_states_are_what_the_head_scores(tiny_vlms, tmp_path):
    vlm, processor = tiny_vlms("idefics3")
    torch.manual_seed(0)
    model = RewardModel(copy.deepcopy(vlm)).eval()
    image = Image.new("RGB", (40, 40), (200, 20, 20))
    image.save(tmp_path / "red.png")
    pair = PreferencePair("p0", str(tmp_path / "red.png"), "What colour?", "It is red.", "It is a blue square.", "e")
    weight = model.head.weight.detach().double().numpy()[0]
    for view, shown in (("multimodal", image), ("drop", None)):
        states = pair_states(model, processor, [pair], view)
        assert states.shape == (1, 2, weight.size)
        expected = candidate_rewards(model, processor, pair.query, [pair.chosen, pair.rejected], image=shown)
        np.testing.assert_allclose(states[0] @ weight, expected, rtol=1e-5, atol=1e-6)
