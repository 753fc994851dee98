"""The metrics registry: each metric declared once, read by eval, studies, the report and the CLI."""

import json

import pytest
import torch

import robustvlm.workflows.finetune.study as study
from robustvlm.analysis.study import aggregate_study
from robustvlm.cli import main
from robustvlm.config import EvalConfig
from robustvlm.data.loaders import load_examples
from robustvlm.data.synth import synthesize
from robustvlm.errors import ConfigError
from robustvlm.evaluation.metrics import registry
from robustvlm.evaluation.metrics.registry import (
    AFTER_GENERATION,
    METRICS,
    PER_BATCH,
    Metric,
    check_metric_names,
)
from robustvlm.model_ref import ModelRef
from robustvlm.report.study_report import table1
from robustvlm.workflows.finetune.evaluate import evaluate

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    synthesize("spurious", root, seed=0, n_per_env=8)
    return load_examples(root)


def test_the_four_metrics_share_one_scale_and_direction():
    # metrics.json states one scale ("0-1") for all and the report compares means as higher-better
    assert list(METRICS) == ["chrf", "exact", "bertscore", "cee"]
    for name, metric in METRICS.items():
        assert metric.name == name and metric.scale == "0-1" and metric.higher_is_better
    assert [m.name for m in registry.per_batch_metrics()] == ["chrf", "exact"]
    assert [m.name for m in registry.after_generation_metrics(["cee", "exact", "bertscore"])] == [
        "bertscore", "cee"]
    assert registry.study_default_metrics() == ["chrf", "bertscore", "cee"]
    assert registry.title("bertscore") == "BERTScore"


def test_check_metric_names_names_the_key_and_the_known_metrics():
    check_metric_names(["chrf", "cee"])
    with pytest.raises(ConfigError) as err:
        check_metric_names(["chrf", "bleu"])
    assert str(err.value) == (
        "eval.metrics: unknown metric(s) 'bleu'; known metrics: chrf, exact, bertscore, cee"
    )
    with pytest.raises(ConfigError, match=r"^study\.yaml: metrics: a list of metric names"):
        check_metric_names("chrf", key="study.yaml: metrics")


def test_needs_are_checked_against_the_eval_settings():
    registry.check_needs(["chrf", "bertscore"], {})  # BERTScore falls back to its default encoder
    with pytest.raises(ConfigError, match=r"'cee' but eval\.judge \(the judge: an OpenAI"):
        registry.check_needs(["cee"], {"judge": None})
    registry.check_needs(["cee"], {"judge": {"base_url": "http://x/v1", "model": "m"}})


def test_bad_metrics_fail_before_any_model_is_loaded(tmp_path, examples, capsys):
    # The model path does not exist: loading it first would raise a different error.
    missing = tmp_path / "no-model"
    with pytest.raises(ConfigError, match=r"^eval\.metrics: unknown metric\(s\) 'bleu'"):
        evaluate(ModelRef.folder(missing), examples, tmp_path / "out", cfg=EvalConfig(metrics=["bleu"]))
    with pytest.raises(ConfigError, match=r"eval\.judge .* is not set"):
        evaluate(ModelRef.folder(missing), examples, tmp_path / "out", cfg=EvalConfig(metrics=["cee"]))
    # The CLI checks before it reads the data (which does not exist either).
    argv = ["eval", "--model", str(missing), "--data", str(tmp_path / "no-data"), "--out", "o"]
    assert main([*argv, "--metrics", "chrf,bleu"]) == 2
    assert "--metrics: unknown metric(s) 'bleu'" in capsys.readouterr().err


def test_a_study_checks_its_runs_eval_metrics():
    config = {
        "base": {"data": {"benchmark": "spurious"}, "eval": {"metrics": ["chrf", "rouge"]}},
        "methods": {"erm": {"method": "erm"}},
    }
    with pytest.raises(ConfigError, match=r"base\.eval\.metrics: unknown metric\(s\) 'rouge'"):
        study.study_runs(config)


# ---------------------------------------------------------------- a throw-away metric


def first_word(predictions, references):
    """1.0 where the first words agree, else 0.0 (0-1)."""
    return [float(p.split()[:1] == r.split()[:1]) for p, r in zip(predictions, references)]


SHORT_CALLS = []


def shorter(rows, cfg, out_dir):
    """scores["short"]: 1.0 where the prediction is no longer than the reference (0-1)."""
    todo = [r for r in rows if "short" not in r["scores"]]
    SHORT_CALLS.append(len(todo))
    for row in todo:
        row["scores"]["short"] = float(len(row["prediction"]) <= len(row["target"]))
    return bool(todo)


@pytest.fixture
def throwaway(monkeypatch):
    """Two metrics registered for one test: one per batch, one after generation."""
    monkeypatch.setitem(METRICS, "first", Metric("first", "First word", PER_BATCH, first_word))
    monkeypatch.setitem(METRICS, "short", Metric("short", "Short", AFTER_GENERATION, shorter))
    SHORT_CALLS.clear()


def test_a_registered_metric_is_computed_reported_and_offered(throwaway, examples, tmp_path, capsys):
    cfg = EvalConfig(metrics=["chrf", "short"], max_new_tokens=3, max_per_env=2)
    metrics = evaluate(ModelRef.parse("tiny:idefics3"), examples, tmp_path, cfg=cfg, progress=False)

    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and SHORT_CALLS == [8]
    for row in rows:
        # per-batch metrics are computed for every row, listed in eval.metrics or not
        assert set(row["scores"]) == {"chrf", "exact", "first", "short"}
        assert row["scores"]["first"] == first_word([row["prediction"]], [row["target"]])[0]
    for group in ("id", "ood"):
        assert set(metrics.to_dict()[group]) == {"chrf", "exact", "first", "short"}
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics.to_dict()

    # resumable: a re-run fills in nothing that is already there
    again = evaluate(ModelRef.parse("tiny:idefics3"), examples, tmp_path, cfg=cfg, resume=True, progress=False)
    assert again == metrics and SHORT_CALLS == [8, 0]

    results = aggregate_study({"erm": {0: rows}}, ["chrf", "first", "short"])
    assert table1(results).header == [
        "method", "ID chrF", "ID First word", "ID Short", "OOD chrF", "OOD First word", "OOD Short",
        "worst env chrF", "worst env First word", "worst env Short"]
    assert study.absent_metrics(["first", "short"], ["chrf"]) == {
        "first": "not computed", "short": "not computed"}
    check_metric_names(["first", "short"])
    plan = study.study_runs({"base": {"data": {"benchmark": "spurious"}},
                             "methods": {"erm": {"method": "erm"}}, "metrics": ["short"]})
    assert plan.runs["erm"][0].eval.metrics == ["chrf", "exact", "short"]
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "short (Short)" in " ".join(capsys.readouterr().out.split())
