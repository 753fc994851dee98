"""Numeric settings (issue 17.4): every number in a config and on the command line has a range,
checked when it is read, with an error naming the key (or option), the value and the allowed
range. Kinds of bad input covered: 20 (11 config settings, 9 command-line options)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_input import expect_clean_failure

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "erm_tasks.yaml"

BAD_SETTINGS = {
    "negative-lr": ("train.lr=-1", "greater than or equal to 0"),
    "save-every-0": ("train.save_every=0", "greater than or equal to 1"),
    "negative-steps": ("train.steps=-5", "greater than or equal to 1"),
    "batch-size-0": ("train.batch_size=0", "greater than or equal to 1"),
    "grad-accum-0": ("train.grad_accum=0", "greater than or equal to 1"),
    "warmup-ratio-2": ("train.warmup_ratio=2", "less than or equal to 1"),
    "boolean-seed": ("train.seed=true", "expected a number, got a boolean"),
    "lora-dropout-1": ("model.lora.dropout=1", "less than 1"),
    "max-new-tokens-0": ("eval.max_new_tokens=0", "greater than or equal to 1"),
    "n-per-env-0": ("data.n_per_env=0", "greater than or equal to 1"),
    "negative-max-per-env": ("eval.max_per_env=-1", "greater than or equal to 1"),
}


@pytest.mark.parametrize("case", list(BAD_SETTINGS))
def test_an_out_of_range_setting_names_key_value_and_range(case, tmp_path, capsys):
    override, allowed = BAD_SETTINGS[case]
    key, value = override.split("=")
    expect_clean_failure(
        ["train", str(CONFIG), "--out", str(tmp_path / "run"), override],
        capsys, mentions=[key.split(".")[0], allowed, *([] if "boolean" in allowed else ["got " + value])],
    )
    assert not (tmp_path / "run").exists()


BAD_OPTIONS = {
    "eval-batch-size-0": (["eval", "--model", "m", "--data", "d", "--out", "o", "--batch-size", "0"], "--batch-size", ">= 1"),
    "eval-max-per-env-negative": (["eval", "--model", "m", "--data", "d", "--out", "o", "--max-per-env", "-1"], "--max-per-env", ">= 1"),
    "eval-batch-size-word": (["eval", "--model", "m", "--data", "d", "--out", "o", "--batch-size", "many"], "--batch-size", "not an integer"),
    "mc-build-k-1": (["mc", "build", "--data", "d", "--out", "o", "--k", "1"], "--k", ">= 2"),
    "rm-sample-top-p": (["rm", "sample", "--data", "d", "--out", "o", "--policy", "p", "--top-p", "1.5"], "--top-p", "(0, 1]"),
    "rm-sample-temperature": (["rm", "sample", "--data", "d", "--out", "o", "--policy", "p", "--temperature", "-1"], "--temperature", ">= 0"),
    "synth-negative-seed": (["data", "synth", "--benchmark", "tasks", "--out", "o", "--seed", "-1"], "--seed", ">= 0"),
    "icl-negative-shots": (["diagnose", "--model", "m", "--data", "d", "--out", "o", "--shots", "-1"], "--shots", ">= 0"),
    "demo-one-env": (["demo", "invariance", "--n-envs", "1"], "--n-envs", ">= 2"),
}


@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_an_out_of_range_option_names_option_value_and_range(case, capsys):
    argv, option, allowed = BAD_OPTIONS[case]
    expect_clean_failure(argv, capsys, mentions=[option, allowed])
