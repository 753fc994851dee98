"""The robustness demo end to end (quick family), checked against independent recomputation."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from report_checks import assert_opens_with_verdict, assert_smoke_verdict_only, without_data_read
from scipy.stats import norm

from robustvlm.data.collate import IGNORE_INDEX, VLMCollator
from robustvlm.data.loaders import load_examples
from robustvlm.experiments.robustness.report import RobustnessDemoSummary
from robustvlm.experiments.robustness.run import (
    QUICK,
    REFERENCE,
    SHIFTS,
    SUITE,
    Member,
    held_out_indices,
    member_config,
    prepare_data,
    run_robustness_demo,
)
from robustvlm.model_ref import ModelRef
from robustvlm.models.loading import load_vlm
from robustvlm.multiple_choice.generative import encode_prefix, option_token_ids, score_options
from robustvlm.workflows.finetune.train import train

EPS = 1e-4  # accuracies of exactly 0 or 1 are clipped before the probit


def _probit(acc):
    return norm.ppf(np.clip(np.asarray(acc, dtype=float), EPS, 1 - EPS))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("robustness")
    return out, run_robustness_demo(out, quick=True)


@pytest.fixture(scope="module")
def demo_data(demo):
    out, _ = demo
    return prepare_data(out, QUICK)


def test_training_sequence_is_the_scored_sequence(demo, demo_data):
    """The collator's training sequence of a row = the scorer's prefix + the correct option's
    continuation (+ the end-of-turn token), so training teaches exactly what is scored."""
    out, _ = demo
    _, processor = load_vlm(ModelRef.folder(out / "models" / QUICK.members[0].name / "final"))
    rows = [ex for ex in load_examples(demo_data.data_jsonl, verbose=False) if ex.split == "train"]
    assert [ex.id for ex in rows] == [q.id for q in demo_data.train_questions]
    collate = VLMCollator(processor, {}, train=True)
    for ex, question in list(zip(rows, demo_data.train_questions))[:5]:
        batch = collate([ex])
        ids, labels = batch["input_ids"][0], batch["labels"][0]
        answer = labels[labels != IGNORE_INDEX].tolist()
        assert answer[:-1] == option_token_ids(processor, question.options)[question.answer]
        assert answer[-1] == processor.tokenizer.eos_token_id
        assert ids[labels == IGNORE_INDEX].tolist() == encode_prefix(processor, question)["input_ids"][0].tolist()


def test_scorer_recovers_the_trained_answers(demo, demo_data, tmp_path):
    """A model trained to memorise 16 training questions is scored right on them far above
    chance (it was at chance when training taught a different answer format)."""
    n = 16
    member = Member("memorise", steps=150, seed=0, n_train=n)
    result = train(member_config(member, demo_data.data_jsonl), tmp_path / "memorise", progress=False)
    model, processor = load_vlm(ModelRef.folder(result.final_dir))
    model.eval()
    questions = demo_data.train_questions[:n]
    correct = [score_options(model, processor, q).prediction(normalize=True) == q.answer for q in questions]
    assert np.mean(correct) >= 0.8  # chance is 1 / 5


def test_outputs_exist(demo):
    out, _ = demo
    assert (out / "report.md").is_file() and (out / "results.json").is_file()
    assert_opens_with_verdict(out)
    assert_smoke_verdict_only((out / "report.md").read_text(), "robustvlm demo: effective robustness")
    for shift in SHIFTS:
        assert (out / "fits" / shift / "fit.json").is_file()
        assert (out / "fits" / shift / "scatter.png").stat().st_size > 1000
        assert f"fits/{shift}/scatter.png" in (out / "report.md").read_text()


def test_every_model_scored_on_every_bench(demo):
    out, summary = demo
    with open(summary.results_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    pairs = {(r["model"], r["bench"]) for r in rows}
    models = {str(out / "models" / m.name / "final") for m in QUICK.members}
    assert pairs == {(m, b) for m in models for b in (REFERENCE, *SHIFTS)}
    assert len(rows) == len(pairs)
    classes = [d.name for d in (out / "data" / SUITE / REFERENCE).iterdir()]
    held_out = held_out_indices(QUICK.per_class, QUICK.test_fraction, classes)
    n_held_out = sum(len(v) for v in held_out.values())
    assert all(int(r["n"]) == n_held_out for r in rows)


def test_fit_and_effective_robustness_recomputed(demo):
    out, summary = demo
    with open(summary.results_csv, newline="") as f:
        acc = {(r["model"], r["bench"]): float(r["accuracy"]) for r in csv.DictReader(f)}
    for shift in SHIFTS:
        fit = json.loads((out / "fits" / shift / "fit.json").read_text())
        paths = [m["model"] for m in fit["models"]]
        shifted = np.array([acc[(p, shift)] for p in paths])
        x = _probit([acc[(p, REFERENCE)] for p in paths])
        slope, intercept = np.polyfit(x, _probit(shifted), 1)
        assert fit["fit"]["slope"] == pytest.approx(slope, abs=1e-9)
        assert fit["fit"]["intercept"] == pytest.approx(intercept, abs=1e-9)
        expected = shifted - norm.cdf(slope * x + intercept)
        got = [m["effective_robustness"] for m in fit["models"]]
        np.testing.assert_allclose(got, expected, atol=1e-9)
        reported = {m.point.model: m.effective_robustness for m in summary.fits[shift].models}
        assert set(reported) == {m.name for m in QUICK.members}
        np.testing.assert_allclose(sorted(reported.values()), sorted(got), atol=1e-12)


def test_rerun_resumes_without_changes(demo):
    out, summary = demo
    before = (out / "scores" / "results.csv").read_text()
    again = run_robustness_demo(out, quick=True)
    assert (out / "scores" / "results.csv").read_text() == before
    assert again.to_dict()["fits"] == summary.to_dict()["fits"]


def test_the_demo_runs_on_real_digits_and_says_so(demo):
    """Issue 19: `demo robustness` uses the real MNIST digits by default."""
    out, _ = demo
    manifest = json.loads((out / "data" / "mnist" / "manifest.json").read_text())
    assert manifest["real_images"] is True and manifest["benchmark"] == "mnist"
    assert "real handwritten MNIST digits" in (out / "report.md").read_text()


def test_results_json_reads_back_through_the_summary_class(demo):
    """Issue 35.1: results.json is the typed summary, written and read back through one class."""
    out, summary = demo
    written = json.loads((out / "results.json").read_text())  # a rerun test may have rewritten it
    again = RobustnessDemoSummary.from_dict(written)
    assert again.to_dict() == without_data_read(written) and again.fits.keys() == summary.fits.keys()
    assert again.to_dict()["fits"] == summary.to_dict()["fits"]
    assert again.fits[SHIFTS[0]].models[0].ci_ref == summary.fits[SHIFTS[0]].models[0].ci_ref

