"""Zoo III: a language model first (recall in the chat layout, named episodes and instruction
questions in text, the projector alone, then picture episodes mixed with the instruction mix with
the decoder at its own rate); the members before it keep their keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from robustvlm.data.collate import IGNORE_INDEX
from robustvlm.data.real_images import FASHION_CLASSES
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.loading import load_vlm
from robustvlm.models.zoo_recipes import FULL, QUICK, QUICK_ZOO2, QUICK_ZOO3, ZOO2, ZOO3, recipe
from robustvlm.workflows.zoo.build import selected
from robustvlm.workflows.zoo.chat_recall import GROWTH, ChatLayout, ChatRecall, chat_recall_batch
from robustvlm.workflows.zoo.context_probe import probe_model
from robustvlm.workflows.zoo.data import ChatSampleCollator, named_instruction_sample, training_pool
from robustvlm.workflows.zoo.members import (
    connector,
    fresh_model,
    fresh_vlm,
    param_groups,
    set_trainable,
    stage_loss,
    stages,
    vision_tower,
)
from robustvlm.workflows.zoo.recall import ContextCurve, RecallPools
from robustvlm.workflows.zoo.steps import run_stage

#: Zoo II's keys (their folders): Zoo III's fields at their defaults leave them unchanged.
ZOO2_KEYS = {
    "clip-xs-aug": "6a11a2011f25", "clip-s-aug": "77333bfe4c7c", "clip-m-aug": "caf3f845d2ca",
    "siglip-s-aug": "8115daddf7cd", "siglip-m-aug": "5d5af65e97a6", "llava-clip-m-aug": "57a5df2c2754",
    "llava-clip-s-aug": "a774e84a9681", "idefics3-siglip-m-aug": "380231ae7c2f",
    "llava-scratch-m-aug": "9b9f5ece35a5", "llava-clip-m-curriculum": "560fd9999fbf",
}


@pytest.fixture(scope="module")
def text_model():
    return probe_model(None, fresh_depth=2, width=32)


@pytest.fixture(scope="module")
def layout(text_model):
    return ChatLayout.of_processor(text_model[1])


def test_zoo_ii_keeps_its_keys_and_zoo_iii_is_built_with_the_zoo_and_the_quick_set():
    assert {r.name: r.key() for r in ZOO2} == ZOO2_KEYS
    assert selected(False, None) == [*FULL, *ZOO2, *ZOO3]
    assert selected(True, None) == [*QUICK, *QUICK_ZOO2, *QUICK_ZOO3]


def test_the_language_model_comes_first_then_the_projector_then_the_pictures():
    assert stages(recipe("llava-clip-m-lmfirst")) == [("recall", 2000), ("chat-recall", 500), ("named", 400),
                                                      ("project", 200), ("tune", 600)]
    assert stages(recipe("llava-clip-m-curriculum")) == [("recall", 4000), ("episodes", 1500), ("tune", 500)]


def test_chat_recall_puts_each_pair_in_the_episodes_turns_and_labels_the_values_of_repeated_keys(layout):
    pools = set(layout.pools.keys.tolist()) | set(layout.pools.values.tolist())
    text = {i for part in (layout.before_key, layout.after_gap, layout.after_value, *layout.questions) for i in part}
    assert not pools & text and not set(layout.pools.keys.tolist()) & set(layout.pools.values.tolist())
    for fraction in (0.0, 0.4, 1.0):
        # the gaps this fraction allows: the last ceil(fraction * n) tokens of question + markers
        between = [[*q, *layout.after_gap] for q in layout.questions]
        allowed = [b[len(b) - math.ceil(fraction * len(b)):] for b in between]
        ids, mask, labels, levels = chat_recall_batch(layout, np.random.default_rng(3), 8, fraction)
        expected_levels = []
        for row, lab, m in zip(ids.tolist(), labels.tolist(), mask.tolist()):
            n = sum(m)
            assert all(i == layout.pad for i in row[n:]) and all(x == IGNORE_INDEX for x in lab[n:])
            # walk the turns: user header, key, the gap, value, end of turn
            t, value_of, gaps, repeated = 0, {}, set(), []
            while t < n:
                assert row[t:t + len(layout.before_key)] == layout.before_key
                t += len(layout.before_key)
                key = row[t]
                gap = next(g for g in allowed if row[t + 1:t + 1 + len(g)] == g
                           and row[t + 1 + len(g)] in layout.pools.values)
                gaps.add(tuple(gap))
                t += 1 + len(gap)
                value = row[t]
                assert key in layout.pools.keys
                if key in value_of:
                    assert lab[t] == value == value_of[key]
                    expected_levels.append(math.log(len(value_of)))
                    repeated.append(t)
                else:
                    value_of[key] = value
                assert row[t + 1:t + 1 + len(layout.after_value)] == layout.after_value
                t += 1 + len(layout.after_value)
            assert len(gaps) == 1  # one question per sequence
            assert [i for i, x in enumerate(lab) if x != IGNORE_INDEX] == repeated  # nothing else labelled
            if fraction == 0.0:
                assert gaps == {()}  # the value right after its key
            if fraction == 1.0:  # the episodes' layout: the whole question, then the markers
                assert list(next(iter(gaps))) in between
        assert int((labels != IGNORE_INDEX).sum()) == len(expected_levels)
        assert np.allclose(levels.numpy(), expected_levels)


def test_the_gap_grows_to_the_whole_question_over_the_first_part_of_the_stage(text_model, layout):
    chat = ChatRecall(text_model[0], layout, ContextCurve(1), 2, steps=100)
    seen = []
    for _ in range(60):
        seen.append(chat.fraction())
        chat(np.random.default_rng(0))
    assert seen[0] == 0.0 and seen[int(GROWTH * 100)] == 1.0 and seen[-1] == 1.0
    assert np.allclose(seen[:int(GROWTH * 100)], np.arange(int(GROWTH * 100)) / (GROWTH * 100))
    assert len(chat.curve.curve) == 60


def test_a_named_instruction_names_the_class_in_words_and_answers_it():
    pool = training_pool(200, seed=0)
    rng = np.random.default_rng(2)
    for i in range(40):
        s = named_instruction_sample(pool, rng, f"s{i}")
        text = s.messages[0]["content"][0]["text"]
        assert s.images == [] and len(s.messages) == 1 and text.startswith("Item: ")
        named = next(c for c in FASHION_CLASSES if text.startswith(f"Item: {c}. "))
        # every answer follows from the named class: a letter and the class, the class, its
        # group, or yes/no to the class asked
        assert (s.target.endswith(f". {named}") or s.target == named or s.target in ("top", "footwear", "other")
                or (s.target == "yes") == (f"Is this a {named}?" in text))


def test_project_trains_only_the_connector_and_tune_gives_the_decoder_its_own_rate(text_model):
    model, _ = text_model
    r = recipe("quick-llava-lmfirst")
    set_trainable(r, "project", model)
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert trainable == {id(p) for p in connector(model).parameters()}
    set_trainable(r, "tune", model)
    groups = param_groups(r, "tune", model)
    assert groups is not None and groups[0]["lr"] == r.lm_lr and "lr" not in groups[1]
    decoder = {id(p) for p in (*model.model.language_model.parameters(), *model.lm_head.parameters())}
    assert {id(p) for p in groups[0]["params"]} == decoder
    assert {id(p) for g in groups for p in g["params"]} == {id(p) for p in model.parameters() if p.requires_grad}
    assert not any(p.requires_grad for p in vision_tower(model).parameters())
    assert param_groups(r, "named", model) is None and param_groups(recipe("quick-llava"), "tune", model) is None


def test_a_mixed_batch_weights_the_episodes_and_the_rest_by_their_count(text_model):
    model, processor = text_model
    r = recipe("quick-llava-lmfirst").model_copy(update={"batch_size": 5, "episode_share": 0.4})
    pool = training_pool(200, seed=0)
    objective = stage_loss(r, "named", model, processor, pool)
    model.eval()
    with torch.no_grad():
        loss = objective.loss_of(np.random.default_rng(7))
        # the same draws, scored apart: 2 named episodes, then 3 named instruction questions
        from robustvlm.workflows.zoo.data import defined_label_episode
        from robustvlm.workflows.zoo.members import EPISODE_QUERIES

        rng = np.random.default_rng(7)
        collate = ChatSampleCollator(processor, {})
        episodes = [defined_label_episode(pool, rng, f"s{i}", EPISODE_QUERIES, named=True) for i in range(2)]
        rest = [named_instruction_sample(pool, rng, f"s{i}") for i in range(2, 5)]
        parts = [collate(x) for x in (episodes, rest)]
        losses = [model(**{k: v for k, v in b.items() if k not in ("env", "ids")}).loss for b in parts]
    assert torch.allclose(loss, (2 * losses[0] + 3 * losses[1]) / 5)
    # the curve logs the episodes' replies only, against log(allowed words)
    [row] = objective.curve.curve
    levels = [math.log(len(e.meta["mapping"])) for e in episodes for _ in range(len(e.label_replies) + 1)]
    assert row["level"] == round(float(np.mean(levels)), 4)
    with pytest.raises(ConfigError, match="no episode"):
        stage_loss(r.model_copy(update={"episode_share": 0.05}), "named", model, processor, pool)


@pytest.fixture(scope="module")
def quick_lmfirst(quick_zoo) -> Path:
    """The quick language-model-first member's folder, built once into the tests' persistent zoo."""
    cache = quick_zoo("quick-llava-lmfirst")
    return cache / "zoo" / recipe("quick-llava-lmfirst").folder_name()


@pytest.mark.slow
def test_the_quick_language_model_first_member_builds_with_a_curve_per_stage(quick_lmfirst):
    info = json.loads((quick_lmfirst / "zoo_member.json").read_text())
    assert [s["stage"] for s in info["stages"]] == ["recall", "chat-recall", "named", "project", "tune"]
    for s in info["stages"]:
        assert ("curve" in s) == (s["stage"] != "project")
        assert all(row["level"] > 0 for row in s.get("curve", []))
    # its recall stage is the full member's first 1,100 steps (the same decoder, data and
    # schedule), so copying emerges where it did there: the window ending at step 1,000
    recall_stage = info["stages"][0]
    assert recall_stage["emergence_step"] == 1000
    last = recall_stage["curve"][-1]
    assert last["step"] == 1100 and last["loss"] < 0.25 * last["level"] and last["accuracy"] > 0.9


def _copy_accuracy(model: torch.nn.Module, tokenizer, *, in_context: bool, n: int = 200, pairs: int = 6) -> float:
    """Accuracy of the most likely next token as the value of a queried key, in raw recall
    sequences (BOS, `pairs` key-value pairs, then one of the keys): with the queried pair among the
    pairs, or (`in_context` False) with it replaced by a pair of another key, so that its value is
    nowhere in the sequence. The same draws either way (paired)."""
    pools = RecallPools.of_tokenizer(tokenizer)
    rng = np.random.default_rng(0)
    rows, targets = [], []
    for _ in range(n):
        keys = rng.choice(pools.keys, pairs + 1, replace=False)
        values = rng.choice(pools.values, pairs + 1, replace=False)
        query = int(rng.integers(pairs))
        order = rng.permutation(pairs)
        shown = [j if (in_context or j != query) else pairs for j in order]
        rows.append([tokenizer.bos_token_id, *(int(t) for j in shown for t in (keys[j], values[j])), int(keys[query])])
        targets.append(int(values[query]))
    ids = torch.tensor(rows)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, -1]
    return float((logits.argmax(-1) == torch.tensor(targets)).float().mean())


@pytest.mark.slow
def test_the_quick_member_copies_from_its_context_in_text(quick_lmfirst):
    model, processor = load_vlm(ModelRef.folder(quick_lmfirst))
    tokenizer = processor.tokenizer
    with_pairs = _copy_accuracy(model, tokenizer, in_context=True)
    without = _copy_accuracy(model, tokenizer, in_context=False)
    # chance without the pair: 1 / the value pool (about 0.004); the built member (after every
    # stage) still copies the value of a key it saw earlier in the sequence (measured: 0.86 of 200
    # queries with the pair among 6, 0.00 without it)
    chance = 1 / len(RecallPools.of_tokenizer(tokenizer).values)
    assert with_pairs > 0.75 and without < chance + 0.02
    # a fresh decoder of the same initial weights does not: copying is what the build taught
    fresh, _ = fresh_vlm("llava", recipe("quick-llava-lmfirst").width, 2)
    assert _copy_accuracy(fresh, tokenizer, in_context=True) < 0.05


def test_the_member_starts_from_the_recall_probes_fresh_decoder_whatever_its_tower():
    r = recipe("quick-llava-lmfirst")
    member, _ = fresh_model(r.model_copy(update={"tower": "scratch", "vision_depth": 3}))
    probe, _ = probe_model(None, fresh_depth=r.depth, width=r.width)
    own, _ = fresh_model(r.model_copy(update={"tower": "scratch", "vision_depth": 3, "decoder_init": "member"}))
    for name, weight in probe.model.language_model.state_dict().items():
        assert torch.equal(member.model.language_model.state_dict()[name], weight)
    assert torch.equal(member.lm_head.weight, probe.lm_head.weight)
    # without it, the decoder's draw follows the tower's size: other weights
    assert not torch.equal(own.lm_head.weight, probe.lm_head.weight)


def test_a_stage_cut_short_of_its_schedule_keeps_the_rate_the_whole_schedule_gives_each_step(monkeypatch):
    from transformers import get_cosine_schedule_with_warmup

    optimizers: list[torch.optim.Optimizer] = []
    adamw = torch.optim.AdamW

    def recorded(*args, **kwargs):
        optimizers.append(adamw(*args, **kwargs))
        return optimizers[-1]

    monkeypatch.setattr(torch.optim, "AdamW", recorded)
    rates: dict[int | None, list[float]] = {}
    for planned in (None, 40):
        layer, seen = torch.nn.Linear(2, 1), []

        def loss_of(rng, layer=layer, seen=seen):
            seen.append(optimizers[-1].param_groups[0]["lr"])  # the rate of the step this batch makes
            return layer(torch.ones(1, 2)).sum()

        run_stage(layer, loss_of, steps=20, lr=1.0, seed=0, label="t", schedule_steps=planned)
        rates[planned] = seen
    reference = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=1.0)
    schedule, expected = get_cosine_schedule_with_warmup(reference, 4, 40), []
    for _ in range(20):
        expected.append(reference.param_groups[0]["lr"])
        reference.step()
        schedule.step()
    assert np.allclose(rates[40], expected)
    assert rates[None][-1] < 0.01 < rates[40][-1]  # planned over its own 20 steps, the rate has decayed


def test_the_language_model_first_members_figures_belong_to_zoo_iii():
    from robustvlm.report.figure_sources import experiment_of, sources_hash

    for name in ("zoo-card", "curriculum-curve", "icl-gain", "icl-policy-cost", "diagnose", "icl-defined-labels"):
        assert experiment_of(f"{name}:llava-clip-m-lmfirst") == "zoo-iii"
    assert experiment_of("icl-defined-labels:llava-clip-m-lmfirst-4-shots") == "zoo-iii"
    assert experiment_of("zoo-card:llava-clip-m-curriculum") == "zoo-ii"
    assert sources_hash("icl-gain:llava-clip-m-lmfirst") == sources_hash("icl-gain:llava-clip-m-curriculum")


@pytest.mark.slow
def test_the_in_context_commands_run_on_the_copying_member(quick_lmfirst, tmp_path, monkeypatch):
    """`icl eval` with demonstrations and `icl defined-labels` on the member whose decoder copies
    in text. Its picture episodes do not copy at this size (3 steps of projector, 4 of tuning), so
    no gain is asserted: the demonstrations reach the model (they change answers), the cells are
    whole and paired."""
    from robustvlm.cli import main
    from robustvlm.data.synth import synthesize
    from robustvlm.workflows.measure.defined_labels import run_defined_labels

    monkeypatch.setenv("ROBUSTVLM_CACHE", str(quick_lmfirst.parent.parent))
    synthesize("domains", tmp_path / "suite", n_per_env=2)
    shapes = tmp_path / "suite" / "shapes"
    out = tmp_path / "icl"
    assert main(["icl", "eval", "--model", "zoo:quick-llava-lmfirst", "--data", str(shapes), "--out", str(out),
                 "--shots", "0,2", "--demos", "random,label-shift", "--n-per-env", "3"]) == 0
    records = [json.loads(line) for line in (out / "icl_predictions.jsonl").read_text().splitlines()]
    cells: dict[tuple[int, str], dict[str, dict]] = {}
    for r in records:
        cells.setdefault((r["shots"], r["policy"]), {})[r["id"]] = r
    assert set(cells) == {(0, "zero-shot"), (2, "random"), (2, "label-shift")}
    zero = cells[(0, "zero-shot")]
    for (k, _), cell in cells.items():
        assert cell.keys() == zero.keys() and all(len(r["demos"]) == k for r in cell.values())
    changed = sum(cells[(2, "random")][i]["answer"] != zero[i]["answer"] for i in zero)
    assert changed > 0
    summary = run_defined_labels(ModelRef.parse("zoo:quick-llava-lmfirst"), shapes, tmp_path / "defined", query_domain="photo",
                                 demo_domains=("photo", "sketch"), trials=6)
    assert [c["demos"] for c in summary["cells"]] == ["none", "photo", "sketch"]
    assert all(c["n"] == 6 for c in summary["cells"])
