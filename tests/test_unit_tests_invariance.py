"""The linear unit tests of invariance: generator statistics against their definitions, the linear
model against independent computations, the selection rule, and the demo end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from robustvlm.cli import main
from robustvlm.data.synth.linear_unit_tests import EXAMPLES, make_unit_test
from robustvlm.errors import ConfigError
from robustvlm.linear.fit import LinearData, errors, fit_linear, linear_outputs
from robustvlm.linear.protocol import METHODS, Protocol, Run, draw_config, run_one, select
from robustvlm.objectives import REGISTRY, build_objective
from robustvlm.objectives.search import sample_hparams, sample_value

N = 40_000


def stacked(samples):
    return np.concatenate([s.inputs for s in samples]), np.concatenate([s.targets for s in samples])


# ---------------------------------------------------------------- generator


def test_example1_moments_follow_the_definition():
    problem = make_unit_test("Example1", seed=3)
    d = problem.dim_inv
    for split in ("train", "test"):
        for sigma, env in zip((0.1, 1.5, 2.0), problem.sample(split, N)):
            x, z, target = env.inputs[:, :d], env.inputs[:, d:], env.targets
            assert x.std(0) == pytest.approx(np.full(d, sigma), rel=0.03)
            coef, *_ = np.linalg.lstsq(x, target, rcond=None)  # E[sum(y) | x] = x W_xy 1
            assert coef == pytest.approx(problem.w_xy.sum(1), abs=0.05 / sigma)
            assert np.var(target - x @ coef) == pytest.approx(d * sigma**2, rel=0.05)
            cov_xz = (x - x.mean(0)).T @ (z - z.mean(0)) / N  # sigma^2 W_xy W_yz in training
            expected = sigma**2 * problem.w_xy @ problem.w_yz if split == "train" else 0 * cov_xz
            assert cov_xz == pytest.approx(expected, abs=4 * sigma * np.sqrt(1 + sigma**2) / np.sqrt(N))


def test_example2_groups_and_labels_follow_the_definition():
    problem = make_unit_test("Example2", seed=4)
    d = problem.dim_inv
    for (p, s), env, shuffled in zip(problem.envs, problem.sample("train", N), problem.sample("test", N)):
        x_inv, x_spu, label = env.inputs[:, :d], env.inputs[:, d:], env.targets
        animal = np.sign(x_inv.mean(1))
        assert np.array_equal(label, (x_inv.sum(1) > 0).astype(float))
        assert np.abs(x_inv).mean() == pytest.approx(0.01, rel=0.05)  # the animal is 100x fainter
        assert (animal > 0).mean() == pytest.approx(s, abs=0.01)  # share of cows
        agree = (np.sign(x_spu.mean(1)) == animal).mean()
        assert agree == pytest.approx(p, abs=0.005)  # cow on grass / camel on sand
        shuffled_agree = (np.sign(shuffled.inputs[:, d:].mean(1)) == np.sign(shuffled.inputs[:, :d].mean(1))).mean()
        grass = s * p + (1 - s) * (1 - p)  # P(background = grass)
        assert shuffled_agree == pytest.approx(s * grass + (1 - s) * (1 - grass), abs=0.01)


def test_example3_class_means_follow_the_definition():
    problem = make_unit_test("Example3", n_envs=4, seed=5)
    d = problem.dim_inv
    for mu, env, shuffled in zip(problem.spurious_means, problem.sample("train", N), problem.sample("test", N)):
        x_inv, x_spu, label = env.inputs[:, :d], env.inputs[:, d:], env.targets
        assert label.mean() == 0.5
        for cls, sign in ((0, 1.0), (1, -1.0)):
            rows = label == cls
            assert x_inv[rows].mean(0) == pytest.approx(np.full(d, 0.1 * sign), abs=0.005)
            assert x_spu[rows].mean(0) == pytest.approx(sign * mu, abs=0.005)
            assert x_spu[rows].std(0) == pytest.approx(np.full(problem.dim_spu, 0.1), rel=0.03)
        spu = shuffled.inputs[:, d:]
        assert spu[shuffled.targets == 0].mean(0) == pytest.approx(spu[shuffled.targets == 1].mean(0), abs=0.03)


@pytest.mark.parametrize("name", ["Example1", "Example2", "Example3"])
def test_scrambled_examples_are_an_orthogonal_map_of_the_plain_ones(name):
    plain, scrambled = make_unit_test(name, seed=6), make_unit_test(name + "s", seed=6)
    s = scrambled.scramble
    assert s @ s.T == pytest.approx(np.eye(plain.dim), abs=1e-12)
    for split in ("train", "test"):
        for a, b in zip(plain.sample(split, 500, stream=1), scrambled.sample(split, 500, stream=1)):
            assert b.inputs @ s.T == pytest.approx(a.inputs, abs=1e-12)
            assert np.array_equal(a.targets, b.targets)


def test_sampling_is_seeded_and_options_are_checked():
    a = make_unit_test("Example2", n_envs=5, dim_inv=2, dim_spu=3, seed=7)
    assert [e.inputs.shape for e in a.sample("train", 10)] == [(10, 5)] * 5
    assert all(0.9 <= p <= 1 and 0.3 <= s <= 0.7 for p, s in a.envs)
    same = make_unit_test("Example2", n_envs=5, dim_inv=2, dim_spu=3, seed=7)
    assert np.array_equal(a.sample("train", 10)[4].inputs, same.sample("train", 10)[4].inputs)
    assert not np.array_equal(a.sample("train", 10)[0].inputs, a.sample("train", 10, stream=1)[0].inputs)
    scales = make_unit_test("Example1", n_envs=6, seed=1).scales
    assert list(scales[:3]) == [0.1, 1.5, 2.0] and all(0.01 <= v <= 10 for v in scales[3:])
    with pytest.raises(ConfigError, match="n_envs >= 2"):
        make_unit_test("Example3", n_envs=1)
    with pytest.raises(ConfigError, match="unknown linear unit test"):
        make_unit_test("Example4")


# ---------------------------------------------------------------- the linear model


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
    fit = fit_linear(build_objective("erm", problem.env_names), data, lr=0.05, weight_decay=0.0,
                     steps=1500, seed=0)
    x = data.features.double().numpy()
    ols, *_ = np.linalg.lstsq(x, data.targets.double().numpy(), rcond=None)
    assert fit.weights == pytest.approx(ols, abs=0.02)
    # IRMv1's penalty (squared-error risk) is near 0 at the invariant map and large at ERM's.
    irm = build_objective("irm", problem.env_names, {"unbiased": False})
    invariant = np.concatenate([problem.w_xy.sum(1), np.zeros(problem.dim_spu), [0.0]])
    at = {name: irm(linear_outputs(torch.tensor(w, dtype=torch.float32), data), 10_000).penalty
          for name, w in (("invariant", invariant), ("ols", ols))}
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


# ---------------------------------------------------------------- search and selection


def test_search_draws_stay_in_their_declared_ranges():
    rng = np.random.default_rng(0)
    assert sample_value(("choice", "a", "b"), rng) in ("a", "b")
    for _ in range(50):
        assert 1e-3 <= sample_value(("log", 1e-3, 1e2), rng) <= 1e2
        v = sample_value(("int_log", 1, 500), rng)
        assert isinstance(v, int) and 1 <= v <= 500
    with pytest.raises(ConfigError, match="search rule"):
        sample_value(("normal", 0, 1), rng)
    drawn = sample_hparams(REGISTRY["birm"].hparams, rng)
    assert set(drawn) == {k for k, h in REGISTRY["birm"].hparams.items() if h.search is not None}


def test_draws_are_defaults_first_then_seeded_and_bounded_by_the_run():
    assert draw_config("irm", 0, 100) == {"lr": 1e-3, "weight_decay": 0.0, "method_args": {}}
    for draw in range(1, 20):
        config = draw_config("dynamic_birm", draw, 100)
        assert config == draw_config("dynamic_birm", draw, 100)
        assert 1e-4 <= config["lr"] <= 1e-2 and 1e-6 <= config["weight_decay"] <= 1e-2
        assert 1 <= config["method_args"]["k_skip"] <= 50
        assert 1 <= draw_config("irm", draw, 100)["method_args"]["anneal_steps"] <= 50
    assert draw_config("oracle", 3, 100) == draw_config("erm", 3, 100)


def run(draw, seed, validation, test):
    return Run(draw, seed, {"lr": draw}, validation, test, not all(map(math.isfinite, validation)))


def test_selection_is_the_smallest_seed_mean_validation_error():
    runs = [
        run(0, 0, [1.0, 1.0], [5.0, 7.0]), run(0, 1, [1.0, 2.0], [6.0, 8.0]),  # mean sum 2.5
        run(1, 0, [0.5, 1.0], [1.0, 3.0]), run(1, 1, [1.0, 1.5], [3.0, 5.0]),  # mean sum 2.0
        run(2, 0, [0.1, 0.1], [0.0, 0.0]), run(2, 1, [math.nan, 0.1], [math.nan, 0.0]),
    ]
    chosen = select(runs)
    assert chosen.draw == 1 and chosen.validation == 2.0 and chosen.diverged == 1
    assert chosen.per_env == [2.0, 4.0] and chosen.mean == 3.0
    assert chosen.std == 1.0  # std over seeds of each environment (1, 1), averaged


def test_one_run_uses_its_split_and_the_oracle_sees_shuffled_data():
    protocol = Protocol(n_per_env=100, steps=20, n_draws=1, n_seeds=1)
    ours, oracle = (run_one("Example2", m, 0, 0, protocol) for m in ("erm", "oracle"))
    assert len(ours.validation) == len(ours.test) == 3 and not ours.diverged
    assert ours.validation != oracle.validation and ours.config == oracle.config
    with pytest.raises(ConfigError, match="unknown method"):
        run_one("Example2", "andmask", 0, 0, protocol)


# ---------------------------------------------------------------- the demo


def test_demo_invariance_quick_writes_the_report(tmp_path):
    out = tmp_path / "inv"
    assert main(["demo", "invariance", "--quick", "--out", str(out)]) == 0
    summary = json.loads((out / "results.json").read_text())
    assert set(summary["results"]) == set(EXAMPLES)
    assert all(set(summary["results"][ex]) == set(METHODS) for ex in EXAMPLES)
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(rows) == len(EXAMPLES) * len(METHODS) * 2  # quick: 2 draws x 1 seed
    report = (out / "report.md").read_text()
    assert "| IRMv1 | published | 11.15 ± 0.71 |" in report  # the shipped reference, read at run time
    assert "| Dynamic BIRM | ours |" in report
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2 and "](" not in html


def test_worker_processes_give_the_same_runs_as_one_process():
    from robustvlm.workflows.invariance_demo import run_jobs

    protocol = Protocol(n_per_env=50, steps=20, n_draws=2, n_seeds=1)
    jobs = [("Example1", "irm", 1, 0), ("Example2s", "dynamic_birm", 1, 0), ("Example3", "oracle", 0, 0)]
    inline = run_jobs(jobs, protocol, workers=1, progress=False)
    assert run_jobs(jobs, protocol, workers=2, progress=False) == inline
    assert inline[jobs[1]].trace and not inline[jobs[0]].trace  # Dynamic BIRM's lambda is traced


def test_other_settings_show_no_published_figures():
    from robustvlm.report.invariance import error_table, reference_paragraph

    entry = {"mean": 0.5, "std": 0.1}
    summary = {
        "results": {ex: dict.fromkeys(METHODS, entry) for ex in EXAMPLES},
        "reference": None,
        "reference_setting": {"n_envs": 3, "dim_inv": 5, "dim_spu": 5},
        "reference_source": {"paper": "Aubin et al.", "source": "their release"},
    }
    assert {row[1] for row in error_table(summary).rows} == {"ours"}
    assert "differs, so none are shown" in reference_paragraph(summary).text
