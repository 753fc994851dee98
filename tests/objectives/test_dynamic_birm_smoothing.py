"""Dynamic BIRM's controller with `smooth="risks"`: R_emp and R_inv averaged before their ratio."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robustvlm.errors import ConfigError
from robustvlm.linear.batched import fit_linear_cell
from robustvlm.linear.fit import LinearData
from robustvlm.objectives import build_objective
from robustvlm.objectives.dynamic_birm import LambdaController
from robustvlm.objectives.linear_cell import Cell

ENVS = ["a", "b"]


def hand_lambdas(rows: list[tuple[float, float]], *, gamma: float, alpha: float, p_min: float, k_skip: int,
                 eps_rel: float, eps: float = 1e-8) -> list[float]:
    """The recurrence of `smooth="risks"` written out: running means of R_emp and R_inv (started
    at the first penalised step's values), then the paper's lambda recurrence on them."""
    lam, out, first, emp_bar, inv_bar = 0.0, [], None, None, None
    for step, (r_emp, r_inv) in enumerate(rows):
        if step < k_skip:
            out.append(0.0)
            continue
        if first is None:
            first, emp_bar, inv_bar = r_inv, r_emp, r_inv
        else:
            emp_bar = alpha * emp_bar + (1 - alpha) * r_emp
            inv_bar = alpha * inv_bar + (1 - alpha) * r_inv
        target = max(gamma * emp_bar, p_min) / max(inv_bar, eps, eps_rel * first)
        lam = alpha * lam + (1 - alpha) * target
        out.append(lam)
    return out


ROWS = [(0.7, 0.02), (0.5, 0.01), (0.3, 2e-3), (0.35, 4e-5), (0.2, 1e-2), (0.25, 3e-6), (0.3, 5e-4), (0.1, 1e-3)]


@pytest.mark.parametrize(("gamma", "p_min", "eps_rel"), [(0.15, 0.05, 0.1), (1.0, 0.0, 0.0)])
def test_risks_smoothing_follows_the_recurrence_by_hand(gamma: float, p_min: float, eps_rel: float) -> None:
    ctl = LambdaController(gamma=gamma, alpha=0.7, p_min=p_min, k_skip=2, eps=1e-8, lambda_max=None,
                           eps_rel=eps_rel, smooth="risks")
    got = [ctl.update(step, *row)[0] for step, row in enumerate(ROWS)]
    assert got == pytest.approx(hand_lambdas(ROWS, gamma=gamma, alpha=0.7, p_min=p_min, k_skip=2,
                                             eps_rel=eps_rel), rel=1e-12)
    paper = LambdaController(gamma=gamma, alpha=0.7, p_min=p_min, k_skip=2, eps=1e-8, lambda_max=None,
                             eps_rel=eps_rel)
    assert [paper.update(step, *row)[0] for step, row in enumerate(ROWS)] != pytest.approx(got)


def test_the_objective_passes_smooth_to_its_controller_and_resumes_exactly() -> None:
    first = build_objective("dynamic_birm", ENVS, {"k_skip": 1, "smooth": "risks", "alpha": 0.5})
    assert first.controller.smooth == "risks"
    for step, row in enumerate(ROWS[:4]):
        first.controller.update(step, *row)
    resumed = build_objective("dynamic_birm", ENVS, {"k_skip": 1, "smooth": "risks", "alpha": 0.5})
    resumed.load_state_dict(first.state_dict())
    assert resumed.controller.r_inv_bar == first.controller.r_inv_bar is not None
    rest = [(first.controller.update(s, *r), resumed.controller.update(s, *r)) for s, r in enumerate(ROWS[4:], 4)]
    assert all(a == b for a, b in rest)


def test_risks_smoothing_keeps_the_penalty_near_its_target_under_batch_noise() -> None:
    """R_inv i.i.d. log-normal over about three decades (as on the pretrained VLM rung's
    mini-batches) at a fixed R_emp: the paper's controller averages P_target / R_inv, so lambda
    times the mean R_inv overshoots P_target by about E[1/X] E[X] = exp(sigma^2); averaging R_inv
    first keeps it near P_target."""
    rng = np.random.default_rng(0)
    sigma, p_target = 1.5, 0.05
    r_inv = np.exp(rng.normal(np.log(1e-3), sigma, size=4000))
    shares = {}
    for smooth in ("lambda", "risks"):
        ctl = LambdaController(gamma=0.15, alpha=0.8, p_min=p_target, k_skip=0, eps=1e-8, lambda_max=None,
                               eps_rel=0.0, smooth=smooth)
        lambdas = np.array([ctl.update(step, 0.1, float(r))[0] for step, r in enumerate(r_inv)])
        shares[smooth] = float(np.mean(lambdas[100:]) * r_inv.mean() / p_target)
    assert shares["lambda"] > 0.5 * np.exp(sigma**2)  # the bias: about 9.5 here
    assert 0.5 < shares["risks"] < 2.0


def test_an_unknown_smooth_and_the_batched_trainer_refuse_clearly() -> None:
    with pytest.raises(ConfigError, match="dynamic_birm.*smooth"):
        build_objective("dynamic_birm", ENVS, {"smooth": "weights"})
    data = LinearData(torch.eye(3).repeat(4, 1), torch.ones(12), torch.arange(12) // 6, "classification")
    with pytest.raises(ConfigError, match="smooth"):
        fit_linear_cell("dynamic_birm", Cell.stack([data], 2),
                        [{"lr": 0.1, "weight_decay": 0.0, "method_args": {"smooth": "risks"}}], steps=1, init_seeds=[0])
