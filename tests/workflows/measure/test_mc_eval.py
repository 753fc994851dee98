"""The multiple-choice runner: results.csv, per-question JSONL, resume, circular (stability:
tests/multiple_choice/test_stability.py)."""

import csv
import io
import json

import numpy as np
import pytest
import torch
from PIL import Image

from robustvlm.analysis.stats import clopper_pearson
from robustvlm.errors import ConfigError, DataError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import infer_family
from robustvlm.multiple_choice import scoring
from robustvlm.multiple_choice.build import MCQuestion, write_questions
from robustvlm.workflows import mc_eval as ev
from robustvlm.workflows.mc_eval import ModelSpec

torch.set_num_threads(1)

CLASSES = ["dog", "cat", "bird", "fish", "star"]


def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (40 * i % 256, 90, 255 - 30 * i % 256)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def bench(tmp_path):
    questions = [
        MCQuestion(id=f"img{i}", image=_png(i), question="", options=CLASSES[i % 5:] + CLASSES[: i % 5],
                   answer=i % 3, source="test", dataset_class="x", prompt="What type of object is in this photo?")
        for i in range(6)
    ]
    path = tmp_path / "shapes.jsonl"
    write_questions(questions, path, embed_images=True)
    return path


def _csv(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_results_match_per_question_rows(bench, tmp_path):
    out = tmp_path / "out"
    results = ev.evaluate_models([ModelRef.tiny("idefics3"), ModelSpec(ModelRef.tiny("clip"))], [bench], out, batch_size=4)
    rows = _csv(results)
    assert list(rows[0]) == list(ev.RESULT_COLUMNS)
    assert [(r["model"], r["family"], r["bench"]) for r in rows] == [
        ("tiny:idefics3", "vlm", "shapes"), ("tiny:clip", "clip", "shapes")]
    for row in rows:
        scored = _jsonl(out / ev.model_slug(row["model"]) / "shapes.jsonl")
        assert [r["id"] for r in scored] == [f"img{i}" for i in range(6)]
        correct = [r["prediction"] == r["answer"] for r in scored]
        assert [r["correct"] for r in scored] == correct
        assert all(r["prediction"] == int(np.argmax(r["scores"])) for r in scored)
        assert int(row["n"]) == 6 and float(row["accuracy"]) == pytest.approx(sum(correct) / 6)
        lo, hi = clopper_pearson(sum(correct), 6)
        assert (float(row["ci_lo"]), float(row["ci_hi"])) == pytest.approx((lo, hi))
        assert row["unparsed"] == "0"


def test_resume_scores_only_missing_questions(bench, tmp_path, monkeypatch):
    out = tmp_path / "out"
    first = _csv(ev.evaluate_models([ModelRef.tiny("idefics3")], [bench], out))
    jsonl = out / "tiny_idefics3" / "shapes.jsonl"
    lines = jsonl.read_text().splitlines(keepends=True)
    jsonl.write_text("".join(lines[:2]) + lines[2][:25])  # two rows kept, a torn third
    scored = []
    original = scoring.question_logliks

    def counting(backend, question):
        scored.append(question.id)
        return original(backend, question)

    monkeypatch.setattr(scoring, "question_logliks", counting)
    again = _csv(ev.evaluate_models([ModelRef.tiny("idefics3")], [bench], out, resume=True))
    assert scored == [f"img{i}" for i in range(2, 6)]
    assert again == first
    assert [r["id"] for r in _jsonl(jsonl)] == [f"img{i}" for i in range(6)]
    scored.clear()
    ev.evaluate_models([ModelRef.tiny("idefics3")], [bench], out, resume=True)
    assert scored == []


def test_bad_complete_line_is_an_error(bench, tmp_path):
    ev.evaluate_models([ModelRef.tiny("clip")], [bench], tmp_path / "out")
    jsonl = tmp_path / "out" / "tiny_clip" / "shapes.jsonl"
    jsonl.write_text("{not json\n" + jsonl.read_text())
    with pytest.raises(DataError, match="line 1"):
        ev.evaluate_models([ModelRef.tiny("clip")], [bench], tmp_path / "out", resume=True)


def test_results_record_the_scoring_method_and_resume_keeps_it(bench, tmp_path, monkeypatch):
    """log-likelihood rows are never reported as generation results (a bug once)."""
    out = tmp_path / "out"
    rows = _csv(ev.evaluate_models([ModelRef.tiny("idefics3"), ModelRef.tiny("clip")], [bench], out))
    assert [r["method"] for r in rows] == ["loglik", "similarity"]
    with pytest.raises(ConfigError, match=r"differs in \[.*'method'\]"):  # and the decoding generation adds
        ev.evaluate_models([ModelRef.tiny("idefics3")], [bench], out, method="generate", resume=True)
    with pytest.raises(ConfigError, match="pass --resume"):
        ev.evaluate_models([ModelRef.tiny("idefics3")], [bench], out, method="generate")
    generated = _csv(ev.evaluate_models([ModelRef.tiny("llava")], [bench], tmp_path / "gen", method="generate"))
    assert generated[0]["method"] == "generate"


def test_circular_counts_a_question_only_if_all_rotations_are_right(bench, tmp_path):
    out = tmp_path / "out"
    rows = _csv(ev.evaluate_models([ModelRef.tiny("clip")], [bench], out, circular=True))
    scored = _jsonl(out / "tiny_clip" / "shapes.jsonl")
    assert len(scored) == 6 * 5 and {r["rotation"] for r in scored} == set(range(5))
    by_id = {}
    for r in scored:
        by_id.setdefault(r["id"], []).append(r["correct"])
    expected = sum(all(v) for v in by_id.values()) / 6
    assert int(rows[0]["n"]) == 6 and float(rows[0]["accuracy"]) == pytest.approx(expected)


def test_generation_counts_unparsed_replies(bench, tmp_path, monkeypatch):
    replies = iter(["B", "no idea", "Answer: (C)", "cat", "zzz", "A. dog"])
    monkeypatch.setattr(scoring, "generate_answers", lambda backend, qs, **decoding: [next(replies) for _ in qs])
    out = tmp_path / "out"
    row = _csv(ev.evaluate_models([ModelRef.tiny("idefics3")], [bench], out, method="generate", batch_size=4))[0]
    scored = _jsonl(out / "tiny_idefics3" / "shapes.jsonl")
    assert [r["prediction"] for r in scored] == [1, None, 2, 3, None, 0]  # "cat" is option D of img3
    assert row["unparsed"] == "2"
    assert float(row["accuracy"]) == pytest.approx(sum(r["correct"] for r in scored) / 6)


def test_family_inferred_from_saved_config(tmp_path, tiny_backends):
    tiny_backends("clip").model.config.save_pretrained(tmp_path / "clip")
    assert infer_family(ModelRef.folder(tmp_path / "clip")) == "clip"
    assert infer_family(ModelRef.parse("tiny:siglip")) == "siglip"
    assert infer_family(ModelRef.parse("tiny:llava")) == "vlm"
