"""Configs of train, study, sweep and rm matrix are fully checked when they are read, before any
run starts or any folder is claimed: a method's or loss's hyperparameters against its declared
ones, seeds, and the YAML itself. Kinds of bad input covered: 16."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bad_input import expect_clean_failure

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
STUDY = yaml.safe_load((CONFIGS / "study_tasks.yaml").read_text())
SWEEP = yaml.safe_load((CONFIGS / "sweep_spurious.yaml").read_text())


def _with(spec: dict, **changes) -> dict:
    return {**spec, **changes}


STUDY_CASES = {
    "unknown-hparam": (_with(STUDY, methods={"irm": {"method": "irm", "penalty_weigth": 10}}), ["methods.irm", "penalty_weigth"]),
    "hparam-wrong-kind": (_with(STUDY, methods={"birm": {"method": "birm", "lambda": "big"}}), ["methods.birm", "lambda", "number"]),
    "hparam-not-a-choice": (_with(STUDY, methods={"irm": {"method": "irm", "penalty_reduction": "max"}}), ["methods.irm", "penalty_reduction"]),
    "hparam-out-of-range": (_with(STUDY, methods={"dyn": {"method": "dynamic_birm", "alpha": 1.0}}), ["methods.dyn", "alpha"]),
    "unknown-method": (_with(STUDY, methods={"x": {"method": "jtt"}}), ["methods.x", "unknown method 'jtt'"]),
    "boolean-seeds": (_with(STUDY, seeds=[True, False]), ["seeds.0", "valid integer"]),
    "unknown-top-level-key": (_with(STUDY, sedes=[0]), ["unknown key", "sedes"]),
}


SWEEP_CASES = {
    "unknown-hparam": (_with(SWEEP, methods={"vrex": {"method": "vrex", "gamma": 2}}), ["methods.vrex", "gamma"]),
    "hparam-wrong-kind": (_with(SWEEP, methods={"irm": {"method": "irm", "unbiased": "yes"}}), ["methods.irm", "unbiased"]),
    "boolean-seeds": (_with(SWEEP, seeds=[True]), ["seeds"]),
}

PLANNED = {("study", case): spec for case, spec in STUDY_CASES.items()} | {
    ("sweep", case): spec for case, spec in SWEEP_CASES.items()
}


@pytest.mark.parametrize(("command", "case"), list(PLANNED), ids=[f"{c}-{k}" for c, k in PLANNED])
def test_study_and_sweep_configs_are_checked_before_any_run(command, case, tmp_path, capsys):
    spec, mentions = PLANNED[command, case]
    path = tmp_path / f"{command}.yaml"
    path.write_text(yaml.safe_dump(spec))
    expect_clean_failure([command, str(path), "--out", str(tmp_path / "out")], capsys,
                         mentions=[str(path), *mentions])
    assert not (tmp_path / "out").exists()


MATRIX = {
    "base": {"model": {"name": "tiny:idefics3"}, "data": {"benchmark": "preferences"}, "train": {"steps": 2}},
    "losses": {"standard": {"loss": "standard"}},
}
MATRIX_CASES = {
    "boolean-seeds": (_with(MATRIX, seeds=[True, True]), ["seeds"]),
    "unknown-loss-arg": (_with(MATRIX, losses={"sa": {"loss": "shortcut_aware", "proxi": "copy"}}), ["proxi"]),
    "loss-arg-not-a-choice": (_with(MATRIX, losses={"sa": {"loss": "shortcut_aware", "proxy": "twin"}}), ["proxy", "twin"]),
}


@pytest.mark.parametrize("case", list(MATRIX_CASES))
def test_matrix_config_is_checked_before_any_run(case, tmp_path, capsys):
    spec, mentions = MATRIX_CASES[case]
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(spec))
    expect_clean_failure(["rm", "matrix", str(path), "--out", str(tmp_path / "mx")], capsys, mentions=mentions)
    assert not (tmp_path / "mx").exists()


TRAIN_CASES = {
    "method-args-unknown": ("method_args.penalty_weigth=3", ["method_args", "penalty_weigth"]),
    "method-args-wrong-kind": ("method_args.k_skip=soon", ["method_args", "k_skip", "number"]),
    "loss-args-on-a-run-config": ("loss_args.proxy=copy", ["loss_args", "unknown key"]),
}


@pytest.mark.parametrize("case", list(TRAIN_CASES))
def test_train_checks_the_method_before_claiming_its_folder(case, tmp_path, capsys):
    override, mentions = TRAIN_CASES[case]
    method = "method=dynamic_birm" if "k_skip" in override or "weigth" in override else "method=erm"
    expect_clean_failure(
        ["train", str(CONFIGS / "erm_tasks.yaml"), "--out", str(tmp_path / "run"), method, override],
        capsys, mentions=mentions,
    )
    assert not (tmp_path / "run").exists()
