"""In-context evaluation: demo policies, multi-image prompts, determinism, gain/cost arithmetic."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
import torch

from robustvlm.analysis.icl import IclCell, icl_summary
from robustvlm.data.synth import synthesize
from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation import icl
from robustvlm.evaluation.metrics.exact import normalize_answer
from robustvlm.models.generate import generate_batch
from robustvlm.workflows import icl as icl_run

torch.set_num_threads(1)


def _draws(examples, policy, k, plan, n=40):
    """(query, demos) for the first n examples as queries, the rest of the data as the pool."""
    return [(q, icl.select_demos(q, examples, k, policy, plan, np.random.default_rng(i)))
            for i, q in enumerate(examples[:n])]


def test_policies_select_what_they_promise(shapes_examples):
    plan = icl.make_plan(shapes_examples, seed=3, n_skew_classes=2)
    domains = sorted({ex.env for ex in shapes_examples})
    assert len(plan.skew_classes) == 2
    assert sorted(plan.spurious_label) == domains
    assert len(set(plan.spurious_label.values())) == len(domains)  # 8 classes >= 4 domains
    k = 4
    for policy in icl.POLICIES:
        for q, demos in _draws(shapes_examples, policy, k, plan):
            assert len(demos) == k and len({d.id for d in demos}) == k and q.id not in {d.id for d in demos}
            if policy == "same-domain":
                assert all(d.env == q.env for d in demos)
            if policy == "cross-domain":
                assert all(d.env != q.env for d in demos)
            if policy == "label-shift":
                assert {d.target for d in demos} <= set(plan.skew_classes)
            if policy == "spurious":
                assert all(d.target == plan.spurious_label[d.env] for d in demos)
    # the candidate sets are exactly the brute-force filters
    q = shapes_examples[0]
    brute = {
        "random": [e for e in shapes_examples if e.id != q.id],
        "same-domain": [e for e in shapes_examples if e.env == q.env and e.id != q.id],
        "cross-domain": [e for e in shapes_examples if e.env != q.env],
        "label-shift": [e for e in shapes_examples if e.target in plan.skew_classes and e.id != q.id],
        "spurious": [e for e in shapes_examples if e.target == plan.spurious_label[e.env] and e.id != q.id],
    }
    for policy, expected in brute.items():
        assert [e.id for e in icl.candidate_demos(q, shapes_examples, policy, plan)] == [e.id for e in expected]
    # random demos do reach other domains; spurious demos span several domains
    assert any(d.env != q.env for q, demos in _draws(shapes_examples, "random", k, plan) for d in demos)
    assert len({d.env for _, demos in _draws(shapes_examples, "spurious", k, plan) for d in demos}) > 1


def test_selection_is_seeded_and_errors_when_short(shapes_examples):
    plan = icl.make_plan(shapes_examples, seed=0)
    a = _draws(shapes_examples, "random", 4, plan, n=10)
    b = _draws(shapes_examples, "random", 4, plan, n=10)
    assert [[d.id for d in ds] for _, ds in a] == [[d.id for d in ds] for _, ds in b]
    assert icl.make_plan(shapes_examples, seed=0) == plan
    with pytest.raises(DataError, match="fewer than k=99"):
        icl.select_demos(shapes_examples[0], shapes_examples, 99, "same-domain", plan, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="unknown demo policy"):
        icl.candidate_demos(shapes_examples[0], shapes_examples, "nearest", plan)


class _SpyProcessor:
    """Wraps a processor, recording the images of each call; optionally refuses several images."""

    def __init__(self, processor, max_images=None):
        self.inner, self.max_images, self.calls = processor, max_images, []
        self.tokenizer, self.image_processor = processor.tokenizer, processor.image_processor

    def apply_chat_template(self, *args, **kwargs):
        return self.inner.apply_chat_template(*args, **kwargs)

    def __call__(self, *, text, images=None, **kwargs):
        self.calls.append((text, images))
        if self.max_images and images and max(len(i) for i in images) > self.max_images:
            raise ValueError("this model takes one image per prompt")
        return self.inner(text=text, images=images, **kwargs)


@pytest.mark.parametrize("kind", ["idefics3", "llava"])
def test_prompt_has_k_plus_one_images_and_demo_answers(shapes_examples, tiny_vlms, kind):
    model, processor = tiny_vlms(kind)
    spy = _SpyProcessor(processor)
    classes = sorted({ex.target for ex in shapes_examples})
    image_id = model.config.image_token_id
    one = icl.encode_prompts(spy, [(shapes_examples[0], [])], classes)
    per_image = int((one["input_ids"] == image_id).sum())
    assert per_image > 0
    plan = icl.make_plan(shapes_examples)
    items = [(q, icl.select_demos(q, shapes_examples, k, "random", plan, np.random.default_rng(k)))
             for k, q in zip((1, 2, 4), shapes_examples[5:8])]
    batch = icl.encode_prompts(spy, items, classes)
    texts, images = spy.calls[-1]
    for (q, demos), text, imgs, ids in zip(items, texts, images, batch["input_ids"]):
        assert len(imgs) == len(demos) + 1
        assert int((ids == image_id).sum()) == (len(demos) + 1) * per_image
        # each demo's question is followed by an assistant turn holding its answer, in order,
        # and the query turn closes the prompt
        pos = 0
        for d in demos:
            reply = processor.apply_chat_template(
                [{"role": "assistant", "content": [{"type": "text", "text": d.target}]}], tokenize=False)
            pos = text.index(reply.strip(), text.index(icl.question(d, classes), pos))
        assert text.rstrip().endswith(processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": icl.question(q, classes)}]}],
            add_generation_prompt=True, tokenize=False).rstrip())


def test_single_image_model_is_a_clear_error(shapes_examples, shapes_vlm):
    model, processor = shapes_vlm
    spy = _SpyProcessor(processor, max_images=1)
    with pytest.raises(ConfigError, match="several images"):
        icl.evaluate_icl(model, spy, shapes_examples, shots=(0, 1), policies=("random",), n_per_domain=1)
    icl.check_multi_image(processor)  # the real tiny processor passes


def test_evaluate_icl_is_deterministic_and_counts_right(shapes_examples, shapes_vlm):
    model, processor = shapes_vlm
    kwargs = dict(shots=(0, 2), policies=("random", "cross-domain"), n_per_domain=2, seed=1)
    preds_a, preds_b, preds_c = [], [], []
    rows_a = icl.evaluate_icl(model, processor, shapes_examples, predictions=preds_a, **kwargs)
    rows_b = icl.evaluate_icl(model, processor, shapes_examples, predictions=preds_b, **kwargs)
    icl.evaluate_icl(model, processor, shapes_examples, predictions=preds_c, batch_size=3, **kwargs)
    assert rows_a == rows_b and preds_a == preds_b
    assert [p["demos"] for p in preds_a] == [p["demos"] for p in preds_c]  # demos ignore batching
    cells = {(r.shots, r.policy) for r in rows_a}
    assert cells == {(0, "zero-shot"), (2, "random"), (2, "cross-domain")}
    queries = {p["id"] for p in preds_a}
    for p in preds_a:
        assert len(p["demos"]) == p["shots"]
        assert not {d[0] for d in p["demos"]} & queries  # queries never serve as demos
        assert p["correct"] == (normalize_answer(p["answer"]) == normalize_answer(p["target"]))
    brute = defaultdict(list)
    for p in preds_a:
        brute[(p["shots"], p["policy"], p["domain"])].append(p["correct"])
        brute[(p["shots"], p["policy"], "all")].append(p["correct"])
    for r in rows_a:
        got = brute[(r.shots, r.policy, r.domain)]
        assert r.n == len(got) and r.accuracy == pytest.approx(np.mean(got))
        assert r.n == (8 if r.domain == "all" else 2)


def test_gain_and_cost_arithmetic():
    rows = [
        IclCell(0, "zero-shot", "a", 10, 2, 0.2),
        IclCell(2, "random", "a", 10, 5, 0.5),
        IclCell(2, "spurious", "a", 10, 3, 0.3),
        IclCell(2, "spurious", "b", 10, 4, 0.4),
    ]
    out = icl_summary(rows)
    assert out[0].gain is None and out[0].cost is None
    assert out[1].gain == pytest.approx(0.3) and out[1].cost == pytest.approx(0.0)
    assert out[2].gain == pytest.approx(0.1) and out[2].cost == pytest.approx(0.2)
    assert out[3].gain is None and out[3].cost is None  # no 0-shot / random row for b


def test_bad_arguments(shapes_examples, shapes_vlm):
    model, processor = shapes_vlm
    with pytest.raises(ConfigError, match="shots"):
        icl.evaluate_icl(model, processor, shapes_examples, shots=(-1,))
    with pytest.raises(ConfigError, match="policies"):
        icl.evaluate_icl(model, processor, shapes_examples, shots=(1,), policies=("nearest",))


def test_run_icl_writes_results(tmp_path, shapes_examples):
    root = tmp_path / "data"
    synthesize("domains", root, n_per_env=2)
    result = icl_run.run_icl("tiny:idefics3", root / "shapes", tmp_path / "out", shots=(0, 1),
                             policies=("same-domain",), n_per_domain=1, seed=0)
    saved = json.loads((tmp_path / "out" / "icl_results.json").read_text())
    assert saved == json.loads(json.dumps(result.to_dict()))
    assert {r["domain"] for r in saved["rows"]} == {"photo", "sketch", "cartoon", "noisy", "all"}
    assert "| 1 | same-domain |" in (tmp_path / "out" / "icl_results.md").read_text()
    lines = (tmp_path / "out" / "icl_predictions.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 4  # two cells x four domains x one query


class _Killed(Exception):
    """Stands in for a kill in the middle of a run."""


def _counting_generate(monkeypatch, calls: list[int], kill_on_call: int | None = None):
    """Patch icl.generate_batch to record the number of prompts of each call (and die on one)."""
    def generate(model, processor, batch, **kwargs):
        if kill_on_call is not None and len(calls) + 1 == kill_on_call:
            raise _Killed
        calls.append(int(batch["input_ids"].shape[0]))
        return generate_batch(model, processor, batch, **kwargs)

    monkeypatch.setattr(icl, "generate_batch", generate)


def test_killed_run_resumes_without_recomputing(tmp_path, monkeypatch):
    root = tmp_path / "data"
    synthesize("domains", root, n_per_env=2)
    kwargs = dict(shots=(0, 1), policies=("random", "same-domain"), n_per_domain=2, seed=0,
                  batch_size=4, progress=False)
    n_records = 3 * 4 * 2  # three cells x four domains x two queries

    whole: list[int] = []
    _counting_generate(monkeypatch, whole)
    expected = icl_run.run_icl("tiny:idefics3", root / "shapes", tmp_path / "whole", **kwargs)
    assert sum(whole) == n_records

    out = tmp_path / "killed"
    _counting_generate(monkeypatch, [], kill_on_call=3)
    with pytest.raises(_Killed):
        icl_run.run_icl("tiny:idefics3", root / "shapes", out, **kwargs)
    log = out / icl_run.PREDICTIONS_FILE
    kept = log.read_text().splitlines()
    assert len(kept) == 8  # two batches of four were written before the kill
    with log.open("a") as f:  # and the kill tore the next line
        f.write(json.dumps({"shots": 1, "policy": "random", "id": "x", "answer": "circ"})[:30])

    resumed: list[int] = []
    _counting_generate(monkeypatch, resumed)
    result = icl_run.run_icl("tiny:idefics3", root / "shapes", out, resume=True, **kwargs)
    assert sum(resumed) == n_records - len(kept)
    assert result == expected
    assert (out / "icl_results.json").read_text() == (tmp_path / "whole" / "icl_results.json").read_text()
    assert log.read_text() == (tmp_path / "whole" / icl_run.PREDICTIONS_FILE).read_text()

    again: list[int] = []  # a finished run resumes to the same results with no generation at all
    _counting_generate(monkeypatch, again)
    assert icl_run.run_icl("tiny:idefics3", root / "shapes", out, resume=True, **kwargs) == expected
    assert again == []


def test_resume_refuses_other_settings(tmp_path):
    root = tmp_path / "data"
    synthesize("domains", root, n_per_env=2)
    out = tmp_path / "out"
    kwargs = dict(shots=(0, 1), policies=("random",), n_per_domain=1, progress=False)
    icl_run.run_icl("tiny:idefics3", root / "shapes", out, seed=0, **kwargs)
    with pytest.raises(ConfigError, match="pass --resume"):  # a finished run is never overwritten
        icl_run.run_icl("tiny:idefics3", root / "shapes", out, seed=0, **kwargs)
    with pytest.raises(ConfigError, match=r"differs in \['seed', 'shots'\]"):
        icl_run.run_icl("tiny:idefics3", root / "shapes", out, resume=True, **{**kwargs, "seed": 1, "shots": (0, 2)})
    icl_run.run_icl("tiny:idefics3", root / "shapes", out, resume=True, seed=0, **{**kwargs, "batch_size": 3})
    log = out / icl_run.PREDICTIONS_FILE
    log.write_text('{"shots": 0}\nnot json\n' + log.read_text())
    with pytest.raises(DataError, match="line 2 is not valid JSON"):  # only a torn *last* line is dropped
        icl_run.run_icl("tiny:idefics3", root / "shapes", out, resume=True, seed=0, **kwargs)
