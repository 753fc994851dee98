"""BERTScore and CEE filled in after generation: values, resume without recomputation, counts."""

import pytest
from stub_judge_server import StubJudgeServer

from robustvlm.analysis.summary import summarize
from robustvlm.config import EvalConfig
from robustvlm.errors import ConfigError
from robustvlm.evaluation.metrics.bertscore import BERTScorer
from robustvlm.evaluation.metrics.registry import (
    add_after_generation_scores as add_reference_scores,
)
from robustvlm.evaluation.reference_scores import cee_counts


def rows():
    data = [("e1", False, "a red circle", "a red circle"), ("e1", False, "a blue square", "two"),
            ("ocr", True, "the word is tree", "tree"), ("ocr", True, "house", "tree")]
    return [{"id": str(i), "env": env, "ood": ood, "instruction": "What is shown?", "prediction": pred,
             "target": ref, "scores": {"chrf": 0.5}} for i, (env, ood, pred, ref) in enumerate(data)]


def test_bertscore_and_cee_are_added_once(tmp_path):
    table = rows()
    with StubJudgeServer() as stub:
        cfg = EvalConfig(metrics=["chrf", "bertscore", "cee"],
                         judge={"base_url": stub.url, "model": "stub", "backoff_s": 0.0})
        assert add_reference_scores(table, cfg, tmp_path / "cache")
        expected = BERTScorer().score([r["prediction"] for r in table], [r["target"] for r in table])["f1"]
        assert [r["scores"]["bertscore"] for r in table] == pytest.approx(expected, abs=1e-6)
        # the stub's verdict: 1 when the reference occurs in the prediction
        assert [r["scores"]["cee"] for r in table] == [1.0, 0.0, 1.0, 0.0]
        asked = stub.requests
        assert asked == 4 * 5
        assert not add_reference_scores(table, cfg, tmp_path / "cache")  # nothing left to score
        assert stub.requests == asked
    metrics = summarize(table, ["chrf", "bertscore", "cee"])
    assert metrics.id["cee"] == 0.5 and metrics.ood["cee"] == 0.5
    assert cee_counts(table) == {"n_judged": 4, "n_ties": 0, "n_no_verdict": 0, "n_unparsed_verdicts": 0}


def test_undecided_cee_is_absent_not_wrong():
    table = rows()
    for row, score in zip(table, [1.0, None, None, 0.0]):
        row["scores"]["cee"] = score
    metrics = summarize(table, ["cee"])
    assert metrics.per_env["e1"].scores["cee"] == 1.0 and metrics.per_env["ocr"].scores["cee"] == 0.0


def test_cee_without_judge_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="eval.judge"):
        add_reference_scores(rows(), EvalConfig(metrics=["cee"]), tmp_path)


def test_unconfigured_metrics_are_absent():
    metrics = summarize(rows(), ["chrf", "bertscore"])
    assert metrics.id["bertscore"] is None  # absent, never 0
