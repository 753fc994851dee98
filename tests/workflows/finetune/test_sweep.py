"""`robustvlm sweep`: planning and its errors, a tiny sweep end to end, resume after a kill
without re-running finished runs, and the submitit local-executor path (the selection itself:
tests/analysis/test_selection.py)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import robustvlm.workflows.finetune.sweep as sweep
from robustvlm.analysis.selection import ORACLE, TRAINING_DOMAIN
from robustvlm.cli import main
from robustvlm.errors import ConfigError, RobustVLMError

torch.set_num_threads(1)

CONFIG = {
    "base": {
        "model": {
            "name": "tiny:idefics3",
            "trainable": "full",
            "tiny": {"hidden_size": 32, "vocab_size": 300},
        },
        "data": {"benchmark": "spurious", "n_per_env": 8},
        "train": {"steps": 4, "lr": 3e-3, "batch_size": 4, "cpu_threads": 1},
        "eval": {"batch_size": 16, "max_new_tokens": 4, "max_per_env": 4, "metrics": ["exact"]},
    },
    "methods": {"erm": {"method": "erm"}, "vrex": {"method": "vrex", "anneal_steps": 1}},
    "n_draws": 2,
    "seeds": [0],
    "checkpoint_every": 2,
    "headline_env": "test-nocolour",
    "reference": {"name": "domainbed_coloredmnist", "env": "test-reversed"},
}


def _with(**changes) -> dict:
    spec = copy.deepcopy(CONFIG)
    for dotted, value in changes.items():
        node, *path = dotted.split("__")
        target = spec
        for key in [node, *path][:-1]:
            target = target[key]
        target[[node, *path][-1]] = value
    return spec


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"colour": 1}, "unknown key"),
        ({"n_draws": 0}, "n_draws"),
        ({"seeds": []}, "seeds"),
        ({"checkpoint_every": "often"}, "checkpoint_every"),
        ({"holdout_fraction": 1.5}, "holdout_fraction"),
        ({"metric": "bertscore"}, "metric"),
        ({"methods__erm": {"method": "sgd"}}, "methods.erm.method"),
        ({"base__train": {"lr": 1e-3}}, "base.train.steps"),
        ({"search": {"lr": ["normal", 0, 1]}}, "search.lr"),
        ({"search": {"anneal_steps": ["log", 1, 10]}}, "search: .*anneal_steps: only lr and weight_decay"),
        ({"launcher": {"kind": "cloud"}}, "launcher.kind"),
        ({"reference": {"name": "imagenet", "env": "x"}}, "reference.name"),
        ({"test_envs": "test-reversed"}, "test_envs"),
    ],
)
def test_bad_sweep_config_names_the_key(tmp_path, changes, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.").replace(r"\.*", ".*")):
        sweep.sweep_plan(_with(**changes), tmp_path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"test_envs": ["train-0.8"]}, r"test_envs: \['train-0.8'\] are not out-of-domain"),
        ({"headline_env": "test-colour"}, "headline_env: 'test-colour' is not a test environment"),
        ({"test_envs": ["test-reversed"]}, "headline_env: 'test-nocolour' is not a test environment"),
    ],
)
def test_bad_test_environments_fail_before_any_run(tmp_path, monkeypatch, changes, message):
    """Issue 35.4: `test_envs` and `headline_env` were checked only after every run had trained."""
    monkeypatch.setattr(sweep, "train", lambda *args, **kwargs: pytest.fail("a run started"))
    with pytest.raises(ConfigError, match=message):
        sweep.run_sweep(_with(**changes), tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_plan_draws_defaults_first_and_shares_draws_across_seeds(tmp_path):
    plan = sweep.sweep_plan(_with(seeds=[0, 1], methods={"birm": {"method": "birm"}}), tmp_path)
    assert len(plan.jobs) == 2 * 2 and plan.checkpoints == [2, 4]
    by = {(j.draw, j.seed): j.cfg for j in plan.jobs}
    assert by[(0, 0)].train.lr == 3e-3 and by[(0, 0)].train.weight_decay == 0.0  # draw 0: base's
    assert by[(0, 0)].method_args == {"seed": 0}  # and the objective's defaults
    assert by[(1, 0)].train.lr == by[(1, 1)].train.lr != 3e-3  # a draw is the same for every seed
    assert by[(1, 1)].method_args == {
        **by[(1, 0)].method_args,
        "seed": 1,
    }  # BIRM's own seed = trial seed
    assert {c.train.seed for (d, s), c in by.items() if s == 1} == {1}
    assert by[(1, 1)].train.save_every == 2 and by[(1, 1)].train.keep_checkpoints == 2
    assert by[(1, 1)].data.holdout_fraction == 0.2


def test_cli_reports_a_bad_sweep_config(tmp_path, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text("base: {data: {benchmark: spurious}}\nmethods: {erm: {method: erm}}\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "base.train.steps" in capsys.readouterr().err


def test_a_killed_sweep_resumes_without_re_running_finished_runs(tmp_path, monkeypatch):
    trained, evaluated = [], []
    real_train, real_evaluate = sweep.train, sweep.evaluate

    def counting_train(cfg, out_dir, **kw):
        trained.append(str(out_dir))
        return real_train(cfg, out_dir, **kw)

    def killed_evaluate(model_dir, examples, out_dir, **kw):
        evaluated.append(str(out_dir))
        if len(evaluated) == 2 * 2 * 2 + 1:  # the third run's first evaluation: the sweep is killed
            raise KeyboardInterrupt
        return real_evaluate(model_dir, examples, out_dir, **kw)

    loads = []
    real_load = sweep.load_from_config

    def counting_load(cfg, work_dir, *args, **kw):
        loads.append(str(work_dir))
        return real_load(cfg, work_dir, *args, **kw)

    monkeypatch.setattr(sweep, "train", counting_train)
    monkeypatch.setattr(sweep, "evaluate", killed_evaluate)
    monkeypatch.setattr(sweep, "load_from_config", counting_load)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(CONFIG, tmp_path, progress=False)
    runs = [tmp_path / "runs" / m / f"draw-{d}" / "seed-0" for m in ("erm", "vrex") for d in (0, 1)]
    assert [(r / "scores.json").is_file() for r in runs] == [True, True, False, False]
    assert trained == [str(r / "train") for r in runs[:3]]
    # issue 35.4: the data are loaded once while planning (headline_env is checked), and each run
    # evaluates the records its training loaded instead of loading them again
    assert len(loads) == 1 and not loads[0].startswith(str(tmp_path))

    trained.clear()
    monkeypatch.setattr(sweep, "evaluate", real_evaluate)
    results = sweep.run_sweep(CONFIG, tmp_path, progress=False)
    # the two finished runs are reused; the killed one resumes (its training was complete)
    assert trained == [str(r / "train") for r in runs[2:]]
    steps = [
        row["step"]
        for row in map(json.loads, (runs[2] / "train" / "train_log.jsonl").read_text().splitlines())
    ]
    assert steps == [1, 2, 3, 4]  # no step trained twice

    trained.clear()
    sweep.run_sweep(CONFIG, tmp_path, progress=False)
    assert trained == []  # a finished sweep trains nothing

    for name in ("results.json", "runs.jsonl", "report.md", "report.html", "sweep_per_env.png"):
        assert (tmp_path / name).is_file(), name
    rows = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 2 and {r["step"] for r in rows} == {2, 4}  # 4 runs x 2 checkpoints
    assert (
        set(rows[0]["val"])
        == set(rows[0]["test"])
        == {"train-0.8", "train-0.9", "test-reversed", "test-nocolour"}
    )
    assert results.train_envs == ["train-0.8", "train-0.9"]
    assert results.test_envs == ["test-nocolour", "test-reversed"]
    for label in ("erm", "vrex"):
        assert set(results.selection[label]) == {TRAINING_DOMAIN, ORACLE}
        assert results.rules[label]["mean"].rule  # spurious has colour prototypes
        assert set(results.oracle_rules[label]) == set(results.test_envs)
    # a finished run drops its resume checkpoints (it is never trained again), keeps final/
    assert (
        not (runs[0] / "train" / "checkpoints").exists() and (runs[0] / "train" / "final").is_dir()
    )
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["selection"]["erm"][TRAINING_DOMAIN]["worst_all"] is not None
    assert saved["selection"]["erm"][ORACLE]["worst_all"] is None
    report = (tmp_path / "report.md").read_text()
    assert (
        "## Training-domain validation" in report and "## Test-domain validation (ORACLE)" in report
    )
    assert "Gulrajani & Lopez-Paz" in report and "worst env (all)" in report
    assert "Headline: the `test-nocolour` environment" in report

    with pytest.raises(ConfigError, match="differs in"):  # other settings never mix into a folder
        sweep.run_sweep(_with(base__train__lr=1e-3), tmp_path, progress=False)


def test_submitit_local_executor_runs_the_sweep(tmp_path):
    spec = _with(
        methods={"erm": {"method": "erm"}},
        n_draws=1,
        launcher={"kind": "slurm", "cluster": "local", "parameters": {"timeout_min": 10}},
    )
    results = sweep.run_sweep(spec, tmp_path, progress=False)
    assert (tmp_path / "runs" / "erm" / "draw-0" / "seed-0" / "scores.json").is_file()
    assert list((tmp_path / "launcher").glob("*_log.out"))  # submitit's own job logs
    assert results.n_runs == 1 and set(results.selection["erm"]) == {TRAINING_DOMAIN, ORACLE}
    with pytest.raises(RobustVLMError, match="1 of 1 runs failed"):
        bad = _with(
            base__data={"benchmark": "spurious", "n_per_env": 8, "seed": 1},
            methods={"erm": {"method": "erm"}},
            n_draws=1,
            launcher={"kind": "slurm", "cluster": "debug"},
        )
        bad["base"]["model"]["name"] = "tiny:nonsense"
        sweep.run_sweep(bad, tmp_path / "bad", progress=False)


@pytest.mark.parametrize("name", ["sweep_spurious", "sweep_digits"])
def test_shipped_sweep_configs_plan(tmp_path, name, monkeypatch):
    from pathlib import Path

    real_load = sweep.load_from_config  # headline_env is checked on the benchmark at 4 records per env
    monkeypatch.setattr(sweep, "load_from_config",
                        lambda cfg, work, **kw: real_load(cfg.model_copy(update={"n_per_env": 4}), work, **kw))
    path = Path(__file__).resolve().parents[3] / "configs" / f"{name}.yaml"
    plan = sweep.sweep_plan(path, tmp_path)
    assert set(plan.methods.values()) == {"erm", "irm", "vrex", "groupdro", "birm", "dynamic_birm"}
    assert len(plan.seeds) >= 2 and plan.headline_env == "test-nocolour"
    assert plan.reference["results"]["IRM"]["test-domain validation (oracle)"] == 58.5


def test_the_smoke_run_shrinks_the_sweep_and_turns_every_penalty_on(tmp_path):
    spec = _with(
        seeds=[3, 4],
        n_draws=5,
        methods={"dyn": {"method": "dynamic_birm"}, "irm": {"method": "irm"}},
        launcher={"kind": "slurm"},
    )
    plan = sweep.sweep_plan(spec, tmp_path, smoke=True)
    assert plan.seeds == [3] and plan.launcher.kind == "local" and plan.checkpoints == [2, 4]
    assert {j.draw for j in plan.jobs} == {0, 1} and plan.smoke
    assert all(j.cfg.model.name == "tiny:idefics3" and j.cfg.train.steps == 4 for j in plan.jobs)
    args = {j.label: j.cfg.method_args for j in plan.jobs if j.draw == 0}
    assert args["dyn"]["k_skip"] == 2 and args["irm"]["anneal_steps"] == 2


TASKS_SWEEP = {
    "base": {
        "model": {"name": "tiny:idefics3", "trainable": "full"},
        "data": {"benchmark": "tasks", "seed": 0, "n_per_env": 4},
        "train": {"steps": 4, "lr": 3.0e-3, "batch_size": 4, "cpu_threads": 1},
        "eval": {"batch_size": 16, "max_new_tokens": 4, "metrics": ["exact"]},
    },
    "methods": {"erm": {"method": "erm"}},
    "n_draws": 1,
    "seeds": [0],
    "checkpoint_every": 2,
    "holdout_fraction": 0.2,
    "metric": "exact",
    "launcher": {"kind": "local"},
}


@pytest.mark.parametrize("smoke", [True, False], ids=["smoke", "full"])
def test_a_sweep_on_data_without_a_colour_manifest_finishes_with_its_report(tmp_path, smoke):
    """Issue 17.6: on `tasks` (or any user data) the rule analysis crashed after training
    (`min() arg is an empty sequence`), in the smoke run as in the full run."""
    results = sweep.run_sweep(TASKS_SWEEP, tmp_path / "sw", smoke=smoke, progress=False)
    assert results.rules == {} and results.oracle_rules == {}
    report = (tmp_path / "sw" / "report.md").read_text()
    assert "Not analysed: the data has no colour manifest" in report


def test_the_sweep_configs_old_study_names_still_work(tmp_path, monkeypatch, capsys):
    """Issue 35.9: `configs/study_{spurious,digits}.yaml` are sweep configs, renamed `sweep_*`; the
    old names resolve (documented paths and `configs copy`) with a deprecation message."""
    from robustvlm.configs import RECIPES, recipe_names, resolve

    assert {"sweep_spurious", "sweep_digits"} <= set(recipe_names())
    assert not {"study_spurious", "study_digits"} & set(recipe_names())
    monkeypatch.chdir(tmp_path)  # no configs/ folder here: the packaged recipe answers
    assert resolve("configs/study_digits.yaml") == str(RECIPES / "sweep_digits.yaml")
    assert "deprecated: the built-in config 'study_digits' is now called 'sweep_digits'" in capsys.readouterr().err
    assert main(["configs", "copy", "study_spurious", "mine"]) == 0
    assert (tmp_path / "mine" / "sweep_spurious.yaml").read_text() == (RECIPES / "sweep_spurious.yaml").read_text()
    assert sweep.sweep_plan(resolve("configs/study_spurious.yaml"), tmp_path / "out", smoke=True).jobs
