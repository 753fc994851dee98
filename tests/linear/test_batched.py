"""Batched training (`linear.batched`) against one model at a time through the objective classes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from robustvlm.data.synth.linear_unit_tests import make_unit_test
from robustvlm.errors import ConfigError
from robustvlm.linear.batched import BATCHED, batched_objectives, fit_linear_cell
from robustvlm.linear.fit import LinearData, fit_linear
from robustvlm.linear.protocol import Protocol, _say_one_at_a_time, draw_config, run_cell, run_one
from robustvlm.objectives import INVARIANCE, REGISTRY, build_objective
from robustvlm.objectives.erm import ERM
from robustvlm.objectives.linear_cell import Cell
from robustvlm.objectives.vrex import VREx

STEPS = 120
DRAWS = [0, 1, 2, 5]  # the defaults, and drawn settings (V-REx's anneal and reset fall inside 120 steps)
SEEDS = [0, 1]


def _cell(example: str, n: int = 150) -> tuple[list[LinearData], list[str]]:
    data = []
    for seed in SEEDS:
        problem = make_unit_test(example, n_envs=3, seed=seed)
        data.append(LinearData.from_envs(problem.sample("train", n, stream=0), problem.task))
    return data, problem.env_names


@pytest.mark.parametrize("example", ["Example1", "Example2", "Example3s"])
@pytest.mark.parametrize("method", BATCHED)
def test_every_model_of_a_cell_is_the_model_fit_linear_trains(example, method):
    data, env_names = _cell(example)
    configs = [draw_config(method, d, STEPS) for d in DRAWS]
    fits = fit_linear_cell(method, Cell.stack(data, 3), configs, steps=STEPS, init_seeds=DRAWS, trace_every=40)
    for d, draw in enumerate(DRAWS):
        for s in range(len(SEEDS)):
            objective = build_objective(method, env_names, configs[d]["method_args"])
            one = fit_linear(objective, data[s], lr=configs[d]["lr"], weight_decay=configs[d]["weight_decay"],
                             steps=STEPS, seed=draw, trace_every=40)
            np.testing.assert_allclose(fits[d][s].weights, one.weights, rtol=1e-3, atol=1e-5)
            assert [r["step"] for r in fits[d][s].trace] == [r["step"] for r in one.trace] == [0, 40, 80, 119]
            for ours, theirs in zip(fits[d][s].trace, one.trace):
                for key in ("R_emp", "R_inv", "lambda"):
                    assert ours[key] == pytest.approx(theirs[key], rel=1e-3, abs=1e-7), (draw, key)


def test_a_diverging_model_stops_with_nan_weights_and_leaves_the_others_alone():
    data, env_names = _cell("Example1")
    good = draw_config("erm", 0, STEPS)
    bad = {**good, "lr": 1e30}  # the first step sends the weights past float32's range
    fits = fit_linear_cell("erm", Cell.stack(data, 3), [good, bad], steps=20, init_seeds=[0, 0])
    assert all(f.diverged for f in fits[1]) and not any(f.diverged for f in fits[0])
    one = fit_linear(build_objective("erm", env_names, {}), data[0], lr=good["lr"], weight_decay=0.0, steps=20, seed=0)
    np.testing.assert_allclose(fits[0][0].weights, one.weights, rtol=1e-4, atol=1e-6)


def test_batched_adam_is_torch_adam():
    """Two models on one least-squares problem, each with its own lr and weight decay, against torch.optim.Adam."""
    settings = [(0.1, 0.0), (0.03, 0.01)]
    features = torch.eye(3).repeat(8, 1)  # [24, 3]: two environments of 12 rows
    data = LinearData(features, torch.ones(24), torch.arange(24) // 12, "regression")
    cell = Cell.stack([data], 2)
    configs = [{"lr": lr, "weight_decay": wd, "method_args": {}} for lr, wd in settings]
    fits = fit_linear_cell("erm", cell, configs, steps=50, init_seeds=[7, 8])
    for (lr, wd), fit, seed in zip(settings, fits, [7, 8]):
        w = ((2 * torch.rand(3, generator=torch.Generator().manual_seed(seed)) - 1) / np.sqrt(2)).requires_grad_()
        adam = torch.optim.Adam([w], lr=lr, weight_decay=wd)
        for _ in range(50):
            adam.zero_grad()
            ((features @ w - 1.0) ** 2).mean().backward()
            adam.step()
        np.testing.assert_allclose(fit[0].weights, w.detach().numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("method", ["irm", "dynamic_birm_eiil"])
def test_run_cell_gives_run_ones_runs_in_draw_then_seed_order(method):
    protocol = Protocol(n_per_env=100, n_eval_per_env=500, steps=60, n_draws=2, n_seeds=2, eiil_steps=200)
    cell = run_cell("Example2s", method, [0, 1], [0, 1], protocol)
    assert [(r.draw, r.seed) for r in cell] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for run in cell:
        one = run_one("Example2s", method, run.draw, run.seed, protocol)
        assert run.config == one.config and run.purity == one.purity and not run.diverged
        np.testing.assert_allclose(run.validation, one.validation, atol=2e-3)  # a few of 500 rows at most
        np.testing.assert_allclose(run.test, one.test, atol=2e-3)


def test_environments_of_unequal_sizes_train_as_fit_linear_trains_them():
    """Inferred environments differ in size, and from one data seed to the next."""
    data, _ = _cell("Example2s")
    for seed, d in enumerate(data):
        d.env = (torch.arange(len(d.env)) % (3 + seed) == 0).long()  # 1 row in 3 (4) in environment 1
    for method in ("erm", "irm", "dynamic_birm"):
        configs = [draw_config(method, d, STEPS) for d in DRAWS[:2]]
        fits = fit_linear_cell(method, Cell.stack(data, 2), configs, steps=STEPS, init_seeds=DRAWS[:2])
        for d, config in enumerate(configs):
            for s, rows in enumerate(data):
                objective = build_objective(method, ["A", "B"], config["method_args"])
                one = fit_linear(objective, rows, lr=config["lr"], weight_decay=config["weight_decay"], steps=STEPS,
                                 seed=DRAWS[d])
                np.testing.assert_allclose(fits[d][s].weights, one.weights, rtol=1e-3, atol=1e-5)


def test_empty_environments_and_unknown_objectives_are_refused():
    data, _ = _cell("Example1")
    empty = LinearData(data[0].features, data[0].targets, data[0].env.clamp(max=1), data[0].task)
    with pytest.raises(ConfigError, match="data seed 0 has an environment without rows"):
        Cell.stack([empty], 3)
    with pytest.raises(ConfigError, match="no batched form of 'andmask'"):
        fit_linear_cell("andmask", Cell.stack(data, 3), [], steps=1, init_seeds=[])


class _MeanVREx(VREx):
    """A registered objective whose loss differs from its parent's and declares no batched form."""

    name = "vrex_mean_risk"

    def __call__(self, out, step):
        return super().__call__(out, step)


class _RenamedERM(ERM):
    """ERM under another name: the same loss, so the same batched form."""

    name = "erm_renamed"


def test_the_batched_objectives_are_the_registrys_and_a_redefined_loss_has_none(monkeypatch):
    assert BATCHED == batched_objectives() == tuple(n for n, c in REGISTRY.items() if c.batched is not None)
    assert set(BATCHED) == set(REGISTRY)  # every built-in objective has a batched form
    monkeypatch.setitem(REGISTRY, _MeanVREx.name, _MeanVREx)
    monkeypatch.setitem(REGISTRY, _RenamedERM.name, _RenamedERM)
    assert _MeanVREx.batched is None and VREx.batched is not None and _RenamedERM.batched is ERM.batched
    assert "vrex_mean_risk" not in batched_objectives() and "erm_renamed" in batched_objectives()
    data, _ = _cell("Example1")
    with pytest.raises(ConfigError, match=r"no batched form of 'vrex_mean_risk'; choose one of \[.*'erm_renamed'"):
        fit_linear_cell("vrex_mean_risk", Cell.stack(data, 3), [], steps=1, init_seeds=[])


def test_run_cell_names_an_objective_without_a_batched_form_and_trains_it_one_at_a_time(monkeypatch, caplog):
    monkeypatch.setitem(REGISTRY, _MeanVREx.name, _MeanVREx)
    monkeypatch.setattr(_MeanVREx, "applies_to", frozenset({INVARIANCE}))
    protocol = Protocol(n_per_env=50, n_eval_per_env=100, steps=20, n_draws=1, n_seeds=2)
    _say_one_at_a_time.cache_clear()
    with caplog.at_level(logging.WARNING, logger="robustvlm.linear.protocol"):
        cell = run_cell("Example2s", "vrex_mean_risk", [0], [0, 1], protocol)
    said = [r.getMessage() for r in caplog.records if "no batched form" in r.getMessage()]
    assert said == ["linear unit tests: vrex_mean_risk (objective 'vrex_mean_risk') has no batched form "
                    "(Objective.batched); its models train one at a time"]
    for run in cell:
        one = run_one("Example2s", "vrex_mean_risk", run.draw, run.seed, protocol)
        assert run.validation == one.validation and run.test == one.test  # the same one-by-one training
