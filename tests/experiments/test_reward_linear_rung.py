"""The reward ladder's linear rung (`experiments.reward.linear_rung`): the shortcut-aware gradient against its
closed form, and the effect the paper reports where it must show."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robustvlm.experiments.reward.linear_rung import (
    LinearPrefs,
    _rewards,
    image_share,
    linear_rung,
    sfd,
)
from robustvlm.reward.losses import (
    LOSSES,
    branch_objective,
    pair_losses,
    shortcut_failure_coefficient,
)


def test_shortcut_aware_gradient_is_the_sfc_weighted_logistic_gradient():
    """d/dw mean_i SFC_i softplus(-w.phi_i) with SFC held fixed = -mean_i SFC_i sigmoid(-w.phi_i) phi_i."""
    prefs = LinearPrefs.draw(50, text_agreement=0.9, seed=3)
    x = torch.as_tensor(prefs.features)
    w = torch.tensor([0.3, -0.7], dtype=x.dtype, requires_grad=True)
    proxy = torch.tensor([0.0, 0.5], dtype=x.dtype)
    hp = LOSSES["shortcut_aware"].resolve({})
    margin = torch.zeros(len(x), dtype=x.dtype)
    c, r, per_pair = pair_losses(_rewards(w, x), margin, hp)
    _, _, per_pair_text = pair_losses(_rewards(proxy, x * torch.tensor([0.0, 1.0], dtype=x.dtype)), margin, hp)
    sfc = shortcut_failure_coefficient(per_pair, per_pair_text)
    branch_objective(c, r, per_pair, hp, weights=sfc).backward()
    phi, weights = prefs.features, sfc.numpy()
    margins = phi @ w.detach().numpy()
    lt = np.logaddexp(0, -(phi @ proxy.numpy()))
    lm = np.logaddexp(0, -margins)
    np.testing.assert_allclose(weights, lt / (lm + lt))
    expected = -(weights * (1 / (1 + np.exp(margins))))[:, None] * phi
    np.testing.assert_allclose(w.grad.numpy(), expected.mean(0), rtol=1e-10)


def test_shortcut_aware_moves_weight_to_the_image_and_gains_out_of_distribution():
    rung = linear_rung((0, 1), n=1000, steps=300)
    standard, aware = rung.losses["standard"], rung.losses["shortcut_aware"]
    for seed in range(2):
        assert aware.image_share[seed] > standard.image_share[seed] + 0.2
        assert aware.ood_accuracy[seed] > standard.ood_accuracy[seed] + 0.05
        assert aware.sfd[seed] < standard.sfd[seed]  # type: ignore[operator]  # defined on this data
    assert rung.losses["text_only"].image_share == [0.0, 0.0]


def test_small_pieces():
    assert image_share(np.array([1.0, -3.0])) == 0.25 and image_share(np.zeros(2)) == 0.5
    assert sfd(np.array([True, False, True, True]), np.array([True, True, False, False])) == pytest.approx(-0.5)
    assert sfd(np.array([True, False]), np.array([True, True])) is None
