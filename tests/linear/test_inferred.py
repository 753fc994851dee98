"""EIIL on the linear unit tests: the reference model's scale gradients and the inferred split."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robustvlm.data.synth.linear_unit_tests import make_unit_test
from robustvlm.linear.fit import LinearData
from robustvlm.linear.inferred import eiil_environments, scale_gradients
from robustvlm.linear.protocol import Protocol, run_one


@pytest.mark.parametrize("example", ["Example1", "Example2"])
def test_scale_gradients_are_the_derivative_of_each_rows_loss(example):
    problem = make_unit_test(example, seed=3)
    data = LinearData.from_envs(problem.sample("train", 20), problem.task)
    weights = torch.linspace(-0.5, 0.5, data.features.shape[1])
    f = (data.features.double() @ weights.double()).numpy()
    y = data.targets.double().numpy()
    if problem.task == "regression":  # d/dw (w f - y)^2 at w = 1
        expected = 2 * (f - y) * f
    else:  # d/dw log(1 + exp(-(2y - 1) w f)) at w = 1 = (sigmoid(f) - y) f
        expected = (1 / (1 + np.exp(-f)) - y) * f
    np.testing.assert_allclose(scale_gradients(weights, data), expected, rtol=1e-5, atol=1e-6)


def test_eiil_split_relabels_the_training_rows_only():
    problem = make_unit_test("Example3", n_envs=3, seed=0)
    train = problem.sample("train", 60)
    inferred = eiil_environments(train, problem.task, steps=30, eiil_steps=50, seed=0)
    given = LinearData.from_envs(train, problem.task)
    assert torch.equal(inferred.data.features, given.features) and torch.equal(inferred.data.targets, given.targets)
    assert set(inferred.data.env.tolist()) <= {0, 1}
    counts = [np.bincount(given.env.numpy()[inferred.data.env.numpy() == e], minlength=3).max()
              for e in np.unique(inferred.data.env.numpy())]
    assert inferred.purity == pytest.approx(sum(counts) / 180)


def test_a_method_on_inferred_environments_takes_its_draws_and_records_purity():
    protocol = Protocol(n_per_env=40, n_eval_per_env=50, steps=10, n_draws=2, n_seeds=1, eiil_steps=50)
    given, inferred = (run_one("Example2", m, 1, 0, protocol) for m in ("irm", "irm_eiil"))
    assert inferred.config == given.config and given.purity is None and 1 / 3 <= inferred.purity <= 1
    assert len(inferred.validation) == len(inferred.test) == 3  # scored on the given environments
