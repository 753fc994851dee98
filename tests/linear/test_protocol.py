"""The unit-test protocol: draws, selection on training-environment validation, one run."""

from __future__ import annotations

import math

import pytest

from robustvlm.errors import ConfigError
from robustvlm.linear.protocol import Protocol, Run, draw_config, paper_irm_config, run_one, select
from robustvlm.linear.published import TABLES, load_table


def test_draws_are_the_authors_defaults_first_then_their_ranges():
    erm0 = draw_config("erm", 0, 100)
    assert erm0 == {"lr": 1e-3, "weight_decay": 0.0, "method_args": {}, "searched": {"lr": 1e-3, "wd": 0.0}}
    irm0 = draw_config("irm", 0, 100)
    assert irm0["searched"]["irm_lambda"] == 0.9 and irm0["method_args"]["lambda"] == pytest.approx(9.0)
    assert irm0["method_args"]["anneal_steps"] == 0 and irm0["method_args"]["penalty_reduction"] == "sum"
    for draw in range(1, 20):
        erm, irm, birm = (draw_config(m, draw, 100) for m in ("erm", "irm", "dynamic_birm"))
        assert erm == draw_config("erm", draw, 100) == draw_config("oracle", draw, 100)
        assert 1e-4 <= erm["lr"] <= 1e-2 and 1e-6 <= erm["weight_decay"] <= 1e-2
        # one random state per draw, as the authors' model seed: ERM, IRMv1 and the rest share lr and wd
        assert irm["searched"]["lr"] == erm["lr"] == birm["lr"] and irm["searched"]["wd"] == erm["weight_decay"]
        lam = irm["searched"]["irm_lambda"]
        assert 1 - 10**-0.3 <= lam <= 1 - 1e-3
        assert irm["weight_decay"] == pytest.approx(erm["weight_decay"] / (1 - lam))
        assert 1 <= birm["method_args"]["k_skip"] <= 50
    with pytest.raises(ConfigError, match="irm_lambda"):
        paper_irm_config(1.0, 1e-3, 0.0)


def test_every_published_hyperparameter_set_is_one_of_our_first_20_draws():
    """The authors' tables record the hyperparameters their selection kept (model seeds 0-19,
    drawn by Python's `random`): each is, value for value, one of our draws 0-19."""
    draws = {}
    for draw in range(20):
        irm = draw_config("irm", draw, 100)["searched"]
        draws[draw] = {"lr": irm["lr"], "wd": irm["wd"], "irm_lambda": irm["irm_lambda"]}
        assert draw_config("erm", draw, 100)["searched"] == {"lr": irm["lr"], "wd": irm["wd"]}
    checked = 0
    for table in TABLES:
        for row in load_table(table)["results"].values():
            for example in row.values():
                for name in ("ERM", "IRMv1", "Oracle"):
                    published = example[name]["hparams"]
                    assert any(all(v == pytest.approx(d[k], rel=1e-9) for k, v in published.items())
                               for d in draws.values()), (name, published)
                    checked += 1
    assert checked == 20 * 6 * 3


def test_paper_irm_config_is_the_authors_adam_on_their_objective():
    """Adam(lr, wd) on (1 - l) R + l P takes the same steps as Adam(lr, wd / (1 - l)) on
    R + (l / (1 - l)) P (computed here with two separate optimisers on a toy problem)."""
    import torch

    lam, lr, wd = 0.97, 1e-2, 3e-3
    config = paper_irm_config(lam, lr, wd)
    weight = config["method_args"]["lambda"]
    target = torch.tensor([1.0, -2.0, 0.5])

    def risk(w):
        return ((w - target) ** 2).sum()

    def penalty(w):
        return (w.sum() - 0.3) ** 2

    theirs = torch.tensor([0.2, 0.1, -0.4], requires_grad=True)
    ours = theirs.detach().clone().requires_grad_()
    opt_theirs = torch.optim.Adam([theirs], lr=lr, weight_decay=wd)
    opt_ours = torch.optim.Adam([ours], lr=config["lr"], weight_decay=config["weight_decay"])
    for _ in range(50):
        opt_theirs.zero_grad()
        ((1 - lam) * risk(theirs) + lam * penalty(theirs)).backward()
        opt_theirs.step()
        opt_ours.zero_grad()
        (risk(ours) + weight * penalty(ours)).backward()
        opt_ours.step()
    assert torch.allclose(theirs, ours, atol=1e-5)
    unscaled = torch.tensor([0.2, 0.1, -0.4], requires_grad=True)  # wd not rescaled: another path
    opt = torch.optim.Adam([unscaled], lr=lr, weight_decay=wd)
    for _ in range(50):
        opt.zero_grad()
        (risk(unscaled) + weight * penalty(unscaled)).backward()
        opt.step()
    assert not torch.allclose(theirs, unscaled, atol=1e-5)


def run(draw, seed, validation, test):
    return Run(draw, seed, {"lr": draw}, validation, test, not all(map(math.isfinite, validation)))


def test_selection_is_the_smallest_seed_mean_validation_error():
    runs = [
        run(0, 0, [1.0, 1.0], [5.0, 7.0]),
        run(0, 1, [1.0, 2.0], [6.0, 8.0]),  # mean sum 2.5
        run(1, 0, [0.5, 1.0], [1.0, 3.0]),
        run(1, 1, [1.0, 1.5], [3.0, 5.0]),  # mean sum 2.0
        run(2, 0, [0.1, 0.1], [0.0, 0.0]),
        run(2, 1, [math.nan, 0.1], [math.nan, 0.0]),
    ]
    chosen = select(runs)
    assert chosen.draw == 1 and chosen.validation == 2.0 and chosen.diverged == 1
    assert chosen.per_env == [2.0, 4.0] and chosen.mean == 3.0
    assert chosen.std == 1.0  # std over seeds of each environment (1, 1), averaged
    assert chosen.seeds == [0, 1] and chosen.per_seed == [2.0, 4.0]  # seed 0: (1 + 3) / 2; seed 1: (3 + 5) / 2


def test_one_run_uses_its_split_and_the_oracle_sees_shuffled_data():
    protocol = Protocol(n_per_env=100, n_eval_per_env=150, steps=20, n_draws=1, n_seeds=1)
    ours, oracle = (run_one("Example2", m, 0, 0, protocol) for m in ("erm", "oracle"))
    assert len(ours.validation) == len(ours.test) == 3 and not ours.diverged
    assert all(abs(e * 150 - round(e * 150)) < 1e-9 for e in ours.test)  # scored on n_eval_per_env rows
    assert ours.validation != oracle.validation and ours.config == oracle.config
    with pytest.raises(ConfigError, match="unknown method"):
        run_one("Example2", "andmask", 0, 0, protocol)
