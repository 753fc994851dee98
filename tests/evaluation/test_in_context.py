"""In-context evaluation: demo policies, multi-image prompts, determinism and counts (gain/cost
arithmetic: tests/analysis/test_in_context_accuracy.py; the run, its outputs and resume: tests/workflows/measure/test_icl_eval.py)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest
import torch

from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation import in_context
from robustvlm.evaluation.icl_settings import InContextSettings
from robustvlm.evaluation.metrics.exact import normalize_answer
from robustvlm.models.backends import VLMBackend
from robustvlm.models.chat import check_multi_image

torch.set_num_threads(1)


def _draws(examples, policy, k, plan, n=40):
    """(query, demos) for the first n examples as queries, the rest of the data as the pool."""
    return [(q, in_context.select_demos(q, examples, k, policy, plan, np.random.default_rng(i)))
            for i, q in enumerate(examples[:n])]


def test_policies_select_what_they_promise(shapes_examples):
    plan = in_context.make_plan(shapes_examples, seed=3, n_skew_classes=2)
    domains = sorted({ex.env for ex in shapes_examples})
    assert len(plan.skew_classes) == 2
    assert sorted(plan.spurious_label) == domains
    assert len(set(plan.spurious_label.values())) == len(domains)  # 8 classes >= 4 domains
    k = 4
    for policy in in_context.POLICIES:
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
        assert [e.id for e in in_context.candidate_demos(q, shapes_examples, policy, plan)] == [e.id for e in expected]
    # random demos do reach other domains; spurious demos span several domains
    assert any(d.env != q.env for q, demos in _draws(shapes_examples, "random", k, plan) for d in demos)
    assert len({d.env for _, demos in _draws(shapes_examples, "spurious", k, plan) for d in demos}) > 1


def test_selection_is_seeded_and_errors_when_short(shapes_examples):
    plan = in_context.make_plan(shapes_examples, seed=0)
    a = _draws(shapes_examples, "random", 4, plan, n=10)
    b = _draws(shapes_examples, "random", 4, plan, n=10)
    assert [[d.id for d in ds] for _, ds in a] == [[d.id for d in ds] for _, ds in b]
    assert in_context.make_plan(shapes_examples, seed=0) == plan
    with pytest.raises(DataError, match="fewer than k=99"):
        in_context.select_demos(shapes_examples[0], shapes_examples, 99, "same-domain", plan, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="unknown demo policy"):
        in_context.candidate_demos(shapes_examples[0], shapes_examples, "nearest", plan)


class _SpyProcessor:
    """Wraps a processor, recording the images of each call; optionally refuses several images."""

    def __init__(self, processor, max_images=None):
        self.inner, self.max_images, self.calls = processor, max_images, []
        self.tokenizer, self.image_processor = processor.tokenizer, processor.image_processor
        self.chat_template = processor.chat_template

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
    one = in_context.encode_prompts(spy, [(shapes_examples[0], [])], classes)
    per_image = int((one["input_ids"] == image_id).sum())
    assert per_image > 0
    plan = in_context.make_plan(shapes_examples)
    items = [(q, in_context.select_demos(q, shapes_examples, k, "random", plan, np.random.default_rng(k)))
             for k, q in zip((1, 2, 4), shapes_examples[5:8])]
    batch = in_context.encode_prompts(spy, items, classes)
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
            pos = text.index(reply.strip(), text.index(in_context.question(d, classes), pos))
        assert text.rstrip().endswith(processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": in_context.question(q, classes)}]}],
            add_generation_prompt=True, tokenize=False).rstrip())


def test_single_image_model_is_a_clear_error(shapes_examples, shapes_backend):
    spy = VLMBackend("spy", "vlm", shapes_backend.model, _SpyProcessor(shapes_backend.processor, max_images=1))
    with pytest.raises(ConfigError, match="several images"):
        in_context.evaluate_icl(spy, shapes_examples, InContextSettings(shots=(0, 1), policies=("random",), n_per_env=1))
    check_multi_image(shapes_backend.processor)  # the real tiny processor passes


def test_evaluate_icl_is_deterministic_and_counts_right(shapes_examples, shapes_backend):
    settings = InContextSettings(shots=(0, 2), policies=("random", "cross-domain"), n_per_env=2, seed=1)
    preds_a, preds_b, preds_c = [], [], []
    rows_a = in_context.evaluate_icl(shapes_backend, shapes_examples, settings, predictions=preds_a)
    rows_b = in_context.evaluate_icl(shapes_backend, shapes_examples, settings, predictions=preds_b)
    in_context.evaluate_icl(shapes_backend, shapes_examples, replace(settings, batch_size=3), predictions=preds_c)
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


def test_bad_arguments():
    with pytest.raises(ConfigError, match="shots"):
        InContextSettings(shots=(-1,))
    with pytest.raises(ConfigError, match="policies"):
        InContextSettings(shots=(1,), policies=("nearest",))
    with pytest.raises(ConfigError, match="n_per_env must be positive"):
        InContextSettings(n_per_env=0)
