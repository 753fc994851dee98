"""Non-finite numbers (issue 29.8-10): NaN and infinities are refused wherever a number is read,
naming the key or the record: float settings of a config (`.inf`, `1e400`, `.nan`), a method's
hyperparameters (also inside a study), a penalty weight below 0, a preference pair's margin, and
VLFeedback ratings (NaN is never equal to NaN, so NaN ratings would never tie and always pair).
Kinds of bad input covered: 15 (5 config settings, 2 command-line options, 4 method arguments, 1
in a study, 2 margins, 1 VLFeedback rating)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from bad_input import expect_clean_failure, run_cli
from PIL import Image

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
CONFIG = CONFIGS / "erm_tasks.yaml"
#: A one-step run on little data: what an unrefused case would train (and then exit 0).
FAST = ["data.n_per_env=2", "train.steps=1", "train.epochs=0.001"]

SETTINGS = {
    "lr-inf": "train.lr=.inf",
    "lr-1e400": "train.lr=1e400",
    "clip-norm-nan": "train.clip_norm=.nan",
    "epochs-inf": "train.epochs=.inf",
    "repetition-penalty-nan": "eval.repetition_penalty=.nan",
}


@pytest.mark.parametrize("case", list(SETTINGS))
def test_a_nonfinite_setting_is_refused_naming_the_key(case, tmp_path, capsys):
    override = SETTINGS[case]
    expect_clean_failure(["train", str(CONFIG), "--out", str(tmp_path / "run"), *FAST, override], capsys,
                         mentions=[override.split("=")[0], "finite number"])
    assert not (tmp_path / "run").exists()


OPTIONS = {
    "eval-repetition-penalty-inf": ["eval", "--model", "m", "--data", "d", "--out", "o", "--repetition-penalty", "inf"],
    "rm-sample-temperature-inf": ["rm", "sample", "--data", "d", "--out", "o", "--policy", "p", "--temperature", "inf"],
}


@pytest.mark.parametrize("case", list(OPTIONS))
def test_a_nonfinite_option_is_refused_naming_it(case, capsys):
    argv = OPTIONS[case]
    expect_clean_failure(argv, capsys, mentions=[argv[-2], "not a finite number"])


METHOD_ARGS = {
    "lambda-nan": ("birm", "method_args.lambda=.nan", "lambda must be a finite number"),
    "lambda-inf": ("irm", "method_args.lambda=.inf", "lambda must be a finite number"),
    "birm-negative-lambda": ("birm", "method_args.lambda=-10", "lambda must be >= 0"),
    "vrex-negative-lambda-before": ("vrex", "method_args.lambda_before=-1", "lambda_before must be >= 0"),
}


@pytest.mark.parametrize("case", list(METHOD_ARGS))
def test_a_nonfinite_or_negative_penalty_weight_is_refused(case, tmp_path, capsys):
    method, override, message = METHOD_ARGS[case]
    expect_clean_failure(
        ["train", str(CONFIG), "--out", str(tmp_path / "run"), *FAST, f"method={method}", override],
        capsys, mentions=["method_args", message],
    )
    assert not (tmp_path / "run").exists()


def test_a_study_refuses_a_negative_birm_weight(tmp_path, capsys):
    spec = yaml.safe_load((CONFIGS / "study_tasks.yaml").read_text())
    spec["methods"] = {"birm": {"method": "birm", "lambda": -10}}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    expect_clean_failure(["study", str(path), "--out", str(tmp_path / "out")], capsys,
                         mentions=[str(path), "methods.birm", "lambda must be >= 0"])
    assert not (tmp_path / "out").exists()


def _image(folder: Path) -> str:
    Image.new("RGB", (8, 8), "red").save(folder / "a.png")
    return "a.png"


@pytest.mark.parametrize("margin", ["NaN", "Infinity"])
def test_rm_data_check_counts_a_nonfinite_margin_as_a_bad_record(margin, tmp_path, capsys):
    image = _image(tmp_path)
    rows = [json.dumps({"id": f"p{i}", "image": image, "query": "q", "chosen": "a", "rejected": "b",
                        "margin": 1.0}) for i in range(2)]
    rows.append(f'{{"id": "bad", "image": "{image}", "query": "q", "chosen": "a", "rejected": "b", '
                f'"margin": {margin}}}')
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert run_cli(["rm", "data", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "2 good pair(s), 1 bad record(s)" in out
    assert f"{path}:3: [bad] field 'margin' must be a finite number" in out


def _completion(response: str, rating) -> dict:
    aspects = ("Helpfulness", "Visual Faithfulness", "Ethical Considerations")
    return {"model": "m", "response": response,
            "annotations": {a: {"Rating": rating, "Rationale": ""} for a in aspects}}


def test_vlfeedback_ratings_that_are_all_nan_are_a_bad_record_not_pairs(tmp_path, capsys):
    image = _image(tmp_path)
    good = {"id": "ok", "prompt": "q", "img_path": image,
            "completions": [_completion("best", "5"), _completion("worst", "1")]}
    nan = {"id": "nan", "prompt": "q", "img_path": image,
           "completions": [_completion(r, float("nan")) for r in ("x", "y", "z", "w")]}
    path = tmp_path / "vlfeedback.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(nan) + "\n", encoding="utf-8")
    assert run_cli(["rm", "data", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "1 good pair(s), 1 bad record(s)" in out
    assert f"{path}:2: [nan] completion 0: Helpfulness Rating must be a finite number" in out
