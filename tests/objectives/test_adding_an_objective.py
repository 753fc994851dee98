"""Adding an objective is its own file and one registry line (issue 50, "Done when"): a copy of
V-REx under a new name, in a plugin package of its own made here, trains through `fit_linear`,
through the linear unit tests' batched fast path (the copy declares its batched form, as V-REx
does) and joins the default method lists (`applicable_methods`), with no file of robustvlm edited."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

import robustvlm.objectives.vrex as vrex_module
from robustvlm import plugins
from robustvlm.data.synth.linear_unit_tests import make_unit_test
from robustvlm.linear.batched import batched_objectives, fit_linear_cell
from robustvlm.linear.fit import LinearData, fit_linear
from robustvlm.linear.protocol import Protocol, draw_config, linear_methods, run_cell, run_one
from robustvlm.objectives import INVARIANCE, LADDER, REGISTRY, applicable_methods, build_objective
from robustvlm.objectives.linear_cell import Cell

PACKAGE = "vrex_copy_plugin"
RENAMES = [  # (V-REx's text, the copy's): every class name, the registry name and the label
    ("VREx", "VRExCopy"),
    ('name = "vrex"', 'name = "vrex_copy"'),
    ('label = "V-REx"', 'label = "V-REx copy"'),
]
REGISTER = f"""from robustvlm.objectives import REGISTRY
from {PACKAGE}.vrex_copy import VRExCopy


def register():
    REGISTRY[VRExCopy.name] = VRExCopy
"""
STEPS = 60
DRAWS = [0, 3]  # V-REx's defaults, and a draw whose anneal (and optimizer reset) falls inside 60 steps


def _copy_of_vrex() -> str:
    """robustvlm's vrex.py with `RENAMES` applied (each must occur, so the copy is a real one)."""
    text = Path(vrex_module.__file__).read_text(encoding="utf-8")
    for old, new in RENAMES:
        assert old in text, f"vrex.py no longer holds {old!r}"
        text = text.replace(old, new)
    return text


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The copy installed as pip leaves a plugin on sys.path: package, module, entry point."""
    package = tmp_path / PACKAGE
    package.mkdir()
    (package / "vrex_copy.py").write_text(_copy_of_vrex(), encoding="utf-8")
    (package / "__init__.py").write_text(REGISTER, encoding="utf-8")
    info = tmp_path / f"{PACKAGE}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[robustvlm.plugins]\nvrex_copy = {PACKAGE}:register\n",
                                           encoding="utf-8")
    saved = dict(REGISTRY)
    plugins.reset_plugins()
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    REGISTRY.clear()
    REGISTRY.update(saved)
    plugins.reset_plugins()
    for name in (f"{PACKAGE}.vrex_copy", PACKAGE):
        sys.modules.pop(name, None)


def _cell() -> tuple[list[LinearData], list[str]]:
    data = []
    for seed in (0, 1):
        problem = make_unit_test("Example2", n_envs=3, seed=seed)
        data.append(LinearData.from_envs(problem.sample("train", 100, stream=0), problem.task))
    return data, problem.env_names


def test_a_copy_of_vrex_in_its_own_file_trains_everywhere_vrex_does(plugin, caplog):
    assert "vrex_copy" not in REGISTRY
    for experiment in (INVARIANCE, LADDER):  # loads the plugin, as every default method list does
        assert "vrex_copy" in applicable_methods(experiment)
    assert "vrex_copy" in batched_objectives() and "vrex_copy" in linear_methods()
    assert REGISTRY["vrex_copy"] is not REGISTRY["vrex"] and REGISTRY["vrex_copy"].label == "V-REx copy"

    data, env_names = _cell()
    configs = [draw_config("vrex", d, STEPS) for d in DRAWS]  # V-REx's draws, given to both
    assert configs[1]["method_args"]["anneal_steps"] < STEPS
    together = {name: fit_linear_cell(name, Cell.stack(data, 3), configs, steps=STEPS, init_seeds=DRAWS,
                                      trace_every=20) for name in ("vrex", "vrex_copy")}
    for d, (draw, config) in enumerate(zip(DRAWS, configs)):
        for s, rows in enumerate(data):
            alone = {name: fit_linear(build_objective(name, env_names, config["method_args"]), rows, lr=config["lr"],
                                      weight_decay=config["weight_decay"], steps=STEPS, seed=draw, trace_every=20)
                     for name in ("vrex", "vrex_copy")}
            assert np.array_equal(alone["vrex_copy"].weights, alone["vrex"].weights)
            assert alone["vrex_copy"].trace == alone["vrex"].trace
            assert np.array_equal(together["vrex_copy"][d][s].weights, together["vrex"][d][s].weights)
            assert together["vrex_copy"][d][s].trace == together["vrex"][d][s].trace
            np.testing.assert_allclose(together["vrex_copy"][d][s].weights, alone["vrex_copy"].weights,
                                       rtol=1e-3, atol=1e-5)

    protocol = Protocol(n_per_env=60, n_eval_per_env=100, steps=30, n_draws=2, n_seeds=1)
    with caplog.at_level(logging.WARNING, logger="robustvlm.linear.protocol"):
        runs = run_cell("Example2s", "vrex_copy", [0, 1], [0], protocol)  # the sweep's fast path
    assert not [r for r in caplog.records if "no batched form" in r.getMessage()]
    for run in runs:
        one = run_one("Example2s", "vrex_copy", run.draw, run.seed, protocol)
        assert run.config == one.config
        np.testing.assert_allclose(run.test, one.test, atol=2e-2)  # a few of 100 rows at most
