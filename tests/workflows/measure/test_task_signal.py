"""`robustvlm robustness task-signal --quick`: the fair construction of the families' data, the
outputs and report, resume."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from robustvlm.cli import main
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.workflows.measure.task_signal import load_task_signal_config, run_task_signal


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("task_signal") / "run"
    cfg = load_task_signal_config(quick=True, overrides=["workers=1"])
    return out, cfg, run_task_signal(cfg, out, label="quick")


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_families_train_on_the_same_images_with_the_same_number_of_pairs(quick):
    out, cfg, summary = quick
    per_family = {f: _jsonl(out / "data" / f"{f}.jsonl") for f in cfg.families}
    images = {f: Counter(r["image"] for r in rows) for f, rows in per_family.items()}
    assert images["caption"] == images["vqa"] == images["mix"]  # same images, same pairs per image
    assert set(images["vqa"].values()) == {len(summary.described)}
    assert {r["env"] for r in per_family["caption"]} == {"caption"}
    assert {r["env"] for r in per_family["vqa"]} == {f"vqa/{a}" for a in summary.described}
    assert 0 < sum(r["env"] == "caption" for r in per_family["mix"]) < len(per_family["mix"])
    rotated = next(r for r in per_family["caption"] if "/rotated/" in r["image"])
    digit = rotated["image"].split("/")[-2]
    assert rotated["target"].startswith(f"a handwritten {digit}, rotated, with")
    answers = {r["instruction"]: r["target"] for r in per_family["vqa"] if r["image"] == rotated["image"]}
    assert answers == {"What digit is shown?": digit, "Is the digit upright or rotated?": "rotated",
                       "Is the image clean or noisy?": "clean"}


def test_outputs_report_and_results(quick):
    out, cfg, summary = quick
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    families = Counter(r["family"] for r in rows)
    n_styles = 1 + len(cfg.shifts)
    assert families == {"caption": 3 * n_styles, "mix": 3 * n_styles, "vqa": 3 * n_styles, "linear-probe": 4 * n_styles}
    assert {r["bench"] for r in rows} == {"clean", *cfg.shifts}
    assert all(int(r["n"]) == summary.n_questions for r in rows)
    report = (out / "report.md").read_text()
    for heading in ("## Answer", "## Lines (probit axes)", "## Lifts at matched reference accuracy", "## Models"):
        assert heading in report
    assert "So, on our data:" in report
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(cfg.shifts)
    result = json.loads((out / "results.json").read_text())
    assert set(result["shifts"]) == set(cfg.shifts)
    for shift in result["shifts"].values():
        for lift in shift["lifts"]:
            assert lift["ci"][0] <= lift["lift"] <= lift["ci"][1] or lift["n_boot"] < 10
    assert all((out / "plots" / f"{s}.png").stat().st_size > 0 for s in cfg.shifts)


def test_resume_reuses_everything_and_refuses_without_flag(quick, capsys):
    out, cfg, summary = quick
    with pytest.raises(ConfigError, match="--resume"):
        run_task_signal(cfg, out)
    log = (out / "models" / "vqa-s9-seed0" / "train_log.jsonl").read_text()
    again = run_task_signal(cfg, out, resume=True, label="quick")
    assert (out / "models" / "vqa-s9-seed0" / "train_log.jsonl").read_text() == log
    assert again.to_dict()["shifts"] == summary.to_dict()["shifts"]
    assert main(["robustness", "task-signal", "--quick", "per_class=1", "--out", str(out / "bad")]) == 2
    assert "per_class" in capsys.readouterr().err


def test_base_steps_zero_builds_the_tiny_base_once_or_takes_a_hub_model(quick, tmp_path):
    from robustvlm.workflows.measure.task_signal import base_vlm
    from robustvlm.workflows.measure.task_signal_data import prepare_data

    out, cfg, _ = quick
    data = prepare_data(out, cfg)
    untrained = cfg.model_copy(update={"base_steps": 0})
    folder = base_vlm(tmp_path, untrained, data)
    assert (Path(folder.location) / "config.json").is_file() and (Path(folder.location) / "tokenizer.json").is_file()
    hub = untrained.model_copy(update={"model": untrained.model.model_copy(update={"name": "org/some-vlm"})})
    assert base_vlm(tmp_path, hub, data) == ModelRef.parse("org/some-vlm")


@pytest.mark.slow
def test_worker_processes_give_the_same_results_as_one_process(quick, tmp_path):
    """`workers: 2` trains the members through the job runner's process pool: the same results."""
    out, cfg, summary = quick
    two = run_task_signal(cfg.model_copy(update={"workers": 2}), tmp_path / "two", label="quick")
    assert (tmp_path / "two" / "results.csv").read_text() == (out / "results.csv").read_text()
    assert two.to_dict()["shifts"] == summary.to_dict()["shifts"]
