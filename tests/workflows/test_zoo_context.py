"""The zoo's context tuning: defined-label sequences (answers only the demonstrations define),
their mix with the instruction samples, defined-label trials, and the recipe fields that start a
member from another one's weights."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
import torch

from robustvlm.cli import main
from robustvlm.data.real_images import FASHION_CLASSES
from robustvlm.errors import ConfigError
from robustvlm.models.zoo_recipes import FULL, RECIPES, Recipe, recipe
from robustvlm.workflows.zoo.context_probe import first_reply_token_nll
from robustvlm.workflows.zoo.data import (
    LABEL_WORDS,
    ChatSampleCollator,
    ImagePool,
    context_tuning_sample,
    defined_label_episode,
    defined_label_sample,
    instruction_sample,
    training_pool,
)
from robustvlm.workflows.zoo.defined_labels import draw_trials


class IndexPool(ImagePool):
    """A pool whose "pictures" are their indices (no rendering): a sample's images say which
    scans it shows."""

    def picture(self, i: int) -> Any:
        return i


@pytest.fixture(scope="module")
def pool():
    real = training_pool(200, seed=0)
    return IndexPool(real.images, real.labels)


def _text(message: dict) -> str:
    return "".join(part.get("text", "") for part in message["content"])


def test_a_defined_label_answer_is_the_word_its_class_carries_in_the_demonstrations(pool):
    rng = np.random.default_rng(0)
    for i in range(60):
        s = defined_label_sample(pool, rng, f"s{i}")
        mapping, demo_classes = s.meta["mapping"], s.meta["demo_classes"]
        demo_words = [_text(m) for m in s.messages if m["role"] == "assistant"]
        assert 2 <= len(demo_words) <= len(LABEL_WORDS) and len(set(demo_words)) == len(demo_words)
        assert sorted(demo_classes) == sorted(mapping) and len(set(demo_classes)) == len(demo_classes)
        # each demonstration's picture is of the class its word names, and the answer is the word
        # of the query's class: it occurs among the demonstrations' answers
        for j, c in enumerate(demo_classes):
            assert demo_words[j] == mapping[c] and pool.labels[s.images[j]] == c
        query_class = s.meta["query_class"]
        assert pool.labels[s.images[-1]] == query_class
        assert s.target == mapping[query_class] and s.target in demo_words
        # the allowed words are exactly the demonstrations' words; one picture per image entry
        assert _text(s.messages[-1]).endswith(f"Answer with one of: {', '.join(sorted(demo_words))}.")
        assert sum(p["type"] == "image" for m in s.messages for p in m["content"]) == len(s.images) == len(demo_words) + 1
        assert s.images[-1] != s.images[demo_classes.index(query_class)]  # never the demonstration's own scan


def test_the_class_to_word_mapping_changes_between_sequences(pool):
    rng = np.random.default_rng(1)
    words_of: dict[int, set[str]] = {}
    mappings = set()
    for i in range(80):
        mapping = defined_label_sample(pool, rng, f"s{i}").meta["mapping"]
        mappings.add(tuple(sorted(mapping.items())))
        for c, w in mapping.items():
            words_of.setdefault(c, set()).add(w)
    assert len(mappings) > 60
    # every class is labelled by several words over the sequences: no fixed class -> word rule
    assert all(len(w) >= 3 for w in words_of.values()) and len(words_of) == 10


def test_context_tuning_mixes_defined_label_sequences_at_its_share(pool):
    rng = np.random.default_rng(2)
    samples = [context_tuning_sample(pool, rng, f"s{i}", share=0.75) for i in range(200)]
    defined = sum("query_class" in s.meta for s in samples)
    assert 130 <= defined <= 170  # 150 expected; binomial sd 6
    # share 0: exactly the instruction samples of the same draws (after the mixing draw)
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    mixed = context_tuning_sample(pool, a, "x", share=0.0)
    b.random()
    plain = instruction_sample(pool, b, "x")
    assert (mixed.target, mixed.messages) == (plain.target, plain.messages)


def test_defined_label_sequences_label_only_the_final_reply(tiny_vlms):
    _, processor = tiny_vlms("llava")
    rng = np.random.default_rng(4)
    samples = [defined_label_sample(training_pool(50, seed=0), rng, f"s{i}") for i in range(4)]
    batch = ChatSampleCollator(processor, {})(samples)
    for row, s in zip(batch["labels"], samples):
        assert processor.tokenizer.decode(row[row != -100]).startswith(s.target)


def test_an_episode_answers_every_query_with_its_class_word_and_labels_the_queries(pool):
    rng = np.random.default_rng(5)
    for i in range(40):
        s = defined_label_episode(pool, rng, f"s{i}", queries=3)
        mapping, demo_classes, asked = s.meta["mapping"], s.meta["demo_classes"], s.meta["query_classes"]
        replies = [_text(m) for m in s.messages if m["role"] == "assistant"] + [s.target]
        shown = [int(pool.labels[i]) for i in s.images]
        assert len(replies) == len(s.images) == len(demo_classes) + 3 and len(set(s.images)) == len(s.images)
        assert shown == [*demo_classes, *asked] and sorted(demo_classes) == sorted(mapping)
        assert replies == [mapping[c] for c in shown]  # each picture is followed by its class's word
        assert s.label_replies == (len(demo_classes), len(demo_classes) + 1)  # the queries before the last


def test_the_collator_labels_the_replies_a_sample_names_and_the_final_one(tiny_vlms):
    _, processor = tiny_vlms("llava")
    rng = np.random.default_rng(6)
    samples = [defined_label_episode(training_pool(50, seed=0), rng, f"s{i}", queries=3) for i in range(3)]
    samples.append(defined_label_sample(training_pool(50, seed=0), rng, "single"))
    batch = ChatSampleCollator(processor, {})(samples)
    tokenizer = processor.tokenizer
    for ids, labels, s in zip(batch["input_ids"], batch["labels"], samples):
        # labelled runs of tokens, decoded one by one: the query words with their end of turn
        labelled = (labels != -100).int().tolist()
        runs, start = [], None
        for i, flag in enumerate([*labelled, 0]):
            if flag and start is None:
                start = i
            if not flag and start is not None:
                runs.append(tokenizer.decode(ids[start:i]))
                start = None
        assert (labels[labels != -100] == ids[labels != -100]).all()
        words = [_text(m) for m in s.messages if m["role"] == "assistant"]
        expected = [words[k] for k in s.label_replies] + [s.target]
        assert runs == [f"{w}<|im_end|>" for w in expected]


def test_a_named_episode_names_each_class_in_words_and_shows_no_picture(pool):
    s = defined_label_episode(pool, np.random.default_rng(7), "n", queries=2, named=True)
    users = [m for m in s.messages if m["role"] == "user"]
    shown = [*s.meta["demo_classes"], *s.meta["query_classes"]]
    assert s.images == [] and all(p["type"] == "text" for m in users for p in m["content"])
    assert [_text(m).split(".")[0] for m in users] == [f"Item: {FASHION_CLASSES[c]}" for c in shown]


def test_first_reply_token_nll_scores_the_first_token_of_each_labelled_reply():
    torch.manual_seed(0)
    logits = torch.randn(2, 7, 5)
    labels = torch.tensor([[-100, -100, 3, 1, -100, 4, 2], [-100, 0, -100, -100, -100, -100, -100]])
    expected = []  # independent: walk the rows, a labelled token after an unlabelled one
    for b in range(2):
        for t in range(1, 7):
            if labels[b, t] != -100 and labels[b, t - 1] == -100:
                p = torch.softmax(logits[b, t - 1].double(), 0)[labels[b, t]]
                expected.append(-float(torch.log(p)))
    assert first_reply_token_nll(logits, labels).tolist() == pytest.approx(expected, rel=1e-5)


def test_the_probe_logs_a_fresh_models_first_token_loss_near_log_vocabulary_and_chance_per_window(tmp_path, capsys):
    argv = ["zoo", "probe-context", "--named", "--queries", "2", "--steps", "2", "--batch-size", "2",
            "--n-images", "50", "--every", "1", "--out", str(tmp_path)]
    assert main(argv) == 2  # neither a member nor a fresh depth
    assert "one of the two" in capsys.readouterr().err
    assert main([*argv, "--fresh-depth", "1"]) == 0
    report = json.loads((tmp_path / "probe.json").read_text())
    assert [c["step"] for c in report["curve"]] == [1, 2] and report["init"] == "fresh, depth 1"
    for c in report["curve"]:
        # a fresh model's logits are near zero: about uniform over the 512-token vocabulary
        assert abs(c["first_token_nll"] - math.log(512)) < 0.3
        assert math.log(2) <= c["chance"] <= math.log(4)


def test_trials_ask_each_way_equally_and_never_show_the_query_as_a_demonstration():
    trials = draw_trials([20] * 10, 200, n_ways=2, shots=2, seed=0)
    assert draw_trials([20] * 10, 200, n_ways=2, shots=2, seed=0) == trials
    for t in trials:
        word_of = dict(zip(t.demos, t.words))
        classes = {c for c, _ in t.demos}
        assert len(classes) == 2 and len(t.demos) == 4 and len(set(t.words)) == 2
        assert all(word_of[d] == word_of[e] for d in t.demos for e in t.demos if d[0] == e[0])
        assert t.query[0] in classes and t.query not in t.demos
        assert t.answer == next(w for d, w in word_of.items() if d[0] == t.query[0])
    first_way = sum(t.answer == t.words[[c for c, _ in t.demos].index(t.query[0])] for t in trials)
    assert first_way == 200
    with pytest.raises(ConfigError, match="n_ways must lie in"):
        draw_trials([20] * 10, 5, n_ways=5)
    with pytest.raises(ConfigError, match="3 ways need 3 classes with at least 2 items; 2 have them"):
        draw_trials([1, 5, 5, 1], 5, n_ways=3)


def test_later_recipe_fields_at_their_default_keep_old_keys_and_init_follows_its_member(monkeypatch):
    pinned = Recipe(name="pinned", arch="clip")
    assert pinned.key() == "50de90f0e19f"  # as before the fields existed
    assert pinned.model_copy(update={"defined_label_share": 0.5}).key() != pinned.key()
    assert recipe("llava-clip-m-icl").key() == "a45ef17537e5"  # the built member keeps its folder
    icl = recipe("llava-clip-m-icl")
    assert icl in FULL and icl.init_member == "llava-clip-m" and icl.defined_label_share > 0
    before = icl.key()
    monkeypatch.setitem(RECIPES, "llava-clip-m", recipe("llava-clip-m").model_copy(update={"steps": 2001}))
    assert icl.key() != before
