"""The reward losses against independent computations: Bradley-Terry with margin, TRL's reward
centering, the shortcut-failure coefficient and the gradient of the SFC-weighted loss."""

from __future__ import annotations

import math

import pytest
import torch

from robustvlm.errors import ConfigError
from robustvlm.reward.losses import (
    LOSSES,
    bradley_terry,
    branch_objective,
    centering_penalty,
    loss_spec,
    pair_losses,
    shortcut_failure_coefficient,
)

R_CHOSEN = [1.5, -0.2, 0.3, 4.0]
R_REJECTED = [0.5, 0.1, 0.3, -3.0]
MARGIN = [0.5, 0.0, 1.0, 2.0]


def bt_by_hand(c: float, r: float, m: float = 0.0) -> float:
    return -math.log(1.0 / (1.0 + math.exp(-(c - r - m))))


def test_bradley_terry_with_and_without_margin():
    c, r, m = torch.tensor(R_CHOSEN), torch.tensor(R_REJECTED), torch.tensor(MARGIN)
    assert bradley_terry(c, r).tolist() == pytest.approx([bt_by_hand(a, b) for a, b in zip(R_CHOSEN, R_REJECTED)])
    assert bradley_terry(c, r, m).tolist() == pytest.approx(
        [bt_by_hand(a, b, x) for a, b, x in zip(R_CHOSEN, R_REJECTED, MARGIN)])
    assert bradley_terry(torch.tensor([100.0]), torch.tensor([-100.0])).item() >= 0  # stable, no nan


def test_objective_adds_trl_centering():
    rewards = torch.tensor(R_CHOSEN + R_REJECTED)
    hp = LOSSES["standard"].resolve({"center_rewards_coefficient": 0.01})
    c, r, per_pair = pair_losses(rewards, torch.tensor(MARGIN), hp)
    expected = sum(bt_by_hand(a, b, x) for a, b, x in zip(R_CHOSEN, R_REJECTED, MARGIN)) / 4
    expected += 0.01 * sum((a + b) ** 2 for a, b in zip(R_CHOSEN, R_REJECTED)) / 4
    assert branch_objective(c, r, per_pair, hp).item() == pytest.approx(expected, rel=1e-6)
    assert centering_penalty(c, r).item() == pytest.approx(sum((a + b) ** 2 for a, b in zip(R_CHOSEN, R_REJECTED)) / 4)
    no_margin = LOSSES["standard"].resolve({"use_margin": False})
    assert pair_losses(rewards, torch.tensor(MARGIN), no_margin)[2].tolist() == pytest.approx(
        [bt_by_hand(a, b) for a, b in zip(R_CHOSEN, R_REJECTED)])


def test_sfc_weighted_loss_value_and_gradient():
    main = torch.tensor(R_CHOSEN + R_REJECTED, requires_grad=True)
    text = torch.tensor([0.2, 0.9, -1.0, 0.0, 0.1, 0.1, 1.0, 0.5], requires_grad=True)
    hp = LOSSES["shortcut_aware"].resolve({})
    margin = torch.zeros(4)
    c_m, r_m, l_main = pair_losses(main, margin, hp)
    c_t, r_t, l_text = pair_losses(text, margin, hp)
    sfc = shortcut_failure_coefficient(l_main, l_text)
    assert not sfc.requires_grad
    lm = [bt_by_hand(a, b) for a, b in zip(R_CHOSEN, R_REJECTED)]
    lt = [bt_by_hand(a, b) for a, b in zip(text[:4].tolist(), text[4:].tolist())]
    assert sfc.tolist() == pytest.approx([t / (m + t) for m, t in zip(lm, lt)])
    loss = branch_objective(c_m, r_m, l_main, hp, weights=sfc)
    assert loss.item() == pytest.approx(sum(w * m for w, m in zip(sfc.tolist(), lm)) / 4)
    loss.backward()
    # d/dr_c of mean_i w_i * -log sigmoid(r_c,i - r_r,i) with w held fixed = -w_i (1 - sigmoid(d_i)) / B
    sig = [1 / (1 + math.exp(-(a - b))) for a, b in zip(R_CHOSEN, R_REJECTED)]
    grad_chosen = [-w * (1 - s) / 4 for w, s in zip(sfc.tolist(), sig)]
    assert main.grad.tolist() == pytest.approx(grad_chosen + [-g for g in grad_chosen], rel=1e-5)
    assert text.grad is None  # the weights carry no gradient into the proxy
    branch_objective(c_t, r_t, l_text, hp).backward()
    assert text.grad is not None


def test_registry_and_argument_errors_name_the_key():
    assert set(LOSSES) == {"standard", "text_only", "shortcut_aware"}
    assert LOSSES["shortcut_aware"].views == ("multimodal", "text") and LOSSES["text_only"].views == ("text",)
    assert LOSSES["shortcut_aware"].resolve({}).to_config() == {"center_rewards_coefficient": None, "use_margin": True,
                                                    "text_mode": "drop", "proxy": "copy"}
    with pytest.raises(ConfigError, match="loss: unknown reward loss 'dpo'"):
        loss_spec("dpo")
    with pytest.raises(ConfigError, match=r"loss_args: loss 'standard' has no hyperparameter\(s\) \['proxy'\]"):
        LOSSES["standard"].resolve({"proxy": "copy"})
    with pytest.raises(ConfigError, match="loss_args: loss 'text_only': text_mode must be one of"):
        LOSSES["text_only"].resolve({"text_mode": "grey"})
    with pytest.raises(ConfigError, match="loss_args: loss 'shortcut_aware': proxy must be one of"):
        LOSSES["shortcut_aware"].resolve({"proxy": "twin"})
    with pytest.raises(ConfigError, match="center_rewards_coefficient"):
        LOSSES["standard"].resolve({"center_rewards_coefficient": "high"})
