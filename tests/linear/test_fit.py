"""The linear model trained through the objective classes, against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from robustvlm.data.synth.linear_unit_tests import make_unit_test
from robustvlm.linear.fit import LinearData, errors, fit_linear, linear_outputs
from robustvlm.objectives import build_objective


def test_linear_outputs_are_logistic_and_squared_losses():
    g = torch.Generator().manual_seed(0)
    weights = torch.randn(11, generator=g)
    cls = make_unit_test("Example3", seed=0)
    data = LinearData.from_envs(cls.sample("train", 50), cls.task)
    f = data.features @ weights
    ce = build_objective("erm", cls.env_names)(linear_outputs(weights, data), 0).loss
    torch.testing.assert_close(ce, F.binary_cross_entropy_with_logits(f, data.targets.float()))
    reg = make_unit_test("Example1", seed=0)
    data = LinearData.from_envs(reg.sample("train", 50), reg.task)
    mse = build_objective("erm", reg.env_names)(linear_outputs(weights, data), 0).loss
    torch.testing.assert_close(mse, ((data.features @ weights - data.targets) ** 2).mean())


def test_erm_fit_reaches_least_squares_and_irm_penalises_the_spurious_solution():
    problem = make_unit_test("Example1", seed=2)
    train = problem.sample("train", 2000)
    data = LinearData.from_envs(train, problem.task)
    fit = fit_linear(
        build_objective("erm", problem.env_names),
        data,
        lr=0.05,
        weight_decay=0.0,
        steps=1500,
        seed=0,
    )
    x = data.features.double().numpy()
    ols, *_ = np.linalg.lstsq(x, data.targets.double().numpy(), rcond=None)
    assert fit.weights == pytest.approx(ols, abs=0.02)
    # IRMv1's penalty (squared-error risk) is near 0 at the invariant map and large at ERM's.
    irm = build_objective("irm", problem.env_names, {"unbiased": False})
    invariant = np.concatenate([problem.w_xy.sum(1), np.zeros(problem.dim_spu), [0.0]])
    at = {
        name: irm(linear_outputs(torch.tensor(w, dtype=torch.float32), data), 10_000).penalty
        for name, w in (("invariant", invariant), ("ols", ols))
    }
    assert at["invariant"] < 0.05 * at["ols"]
    test = problem.sample("test", 2000, stream=2)
    assert np.mean(errors(invariant, test, "regression")) < np.mean(errors(ols, test, "regression"))


def test_errors_are_mean_squared_and_zero_one():
    env = make_unit_test("Example3", seed=1).sample("train", 20)[0]
    w = np.zeros(11)
    w[-1] = 1.0  # always predicts class 1
    assert errors(w, [env], "classification") == [0.5]
    assert errors(w, [env], "regression") == [pytest.approx(np.mean((1 - env.targets) ** 2))]
    assert math.isnan(errors(np.full(11, np.nan), [env], "classification")[0])


@pytest.mark.parametrize("example", ["Example1", "Example3"])
def test_irm_with_shift_dummy_is_the_authors_two_dummy_objective(example):
    """(1 - l) R + l sum_e (|dR^e/d mul|^2 + |dR^e/d add|^2), computed as the authors' `IRMLayer`
    does (autograd through dummies: f * mul + add, BCEWithLogitsLoss or MSELoss per environment),
    is (1 - l) times our `irm` with weight l / (1 - l) and `shift_dummy`, in value and gradient."""
    problem = make_unit_test(example, n_envs=3, dim_spu=2, seed=4)
    data = LinearData.from_envs(problem.sample("train", 50), problem.task)
    lam = 0.9
    weights = torch.linspace(-0.5, 0.7, data.features.shape[1]).requires_grad_()
    config = {"lambda": lam / (1 - lam), "anneal_steps": 0, "penalty_reduction": "sum", "unbiased": False,
              "shift_dummy": True}
    ours = build_objective("irm", problem.env_names, config)(linear_outputs(weights, data), 0).loss * (1 - lam)
    (grad_ours,) = torch.autograd.grad(ours, weights)

    mul, add = torch.ones(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    loss = torch.nn.MSELoss() if problem.task == "regression" else torch.nn.BCEWithLogitsLoss()
    risks, penalty = [], 0.0
    for e in range(3):
        rows = data.env == e
        f = (data.features[rows] @ weights) * mul + add
        risks.append(loss(f, data.targets[rows].float()))
        penalty = penalty + sum(g.pow(2).sum() for g in torch.autograd.grad(risks[-1], [mul, add], create_graph=True))
    theirs = (1 - lam) * sum(risks) / 3 + lam * penalty
    (grad_theirs,) = torch.autograd.grad(theirs, weights)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)
    torch.testing.assert_close(grad_ours, grad_theirs, rtol=1e-4, atol=1e-6)
    no_shift = build_objective("irm", problem.env_names, {**config, "shift_dummy": False})
    assert no_shift(linear_outputs(weights, data), 0).loss.item() * (1 - lam) < theirs.item() - 1e-6
