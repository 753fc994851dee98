"""Environment assignment: env maps (with OOD environments), task-type rules, counts tables."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from robustvlm.data import (
    SPLITS,
    TASK_RULES,
    TASK_TYPES,
    Example,
    assign_task_type,
    env_counts,
    format_env_counts,
    load_env_map,
    load_examples,
)
from robustvlm.errors import ConfigError

ENV_YAML = """\
environments:
  general: {sources: [coco, vqav2]}
  reasoning: {sources: [geo170k]}
  ocr: {sources: [textocr, st_vqa], ood: true}
"""


def write_records(path, sources_and_splits):
    rows = [{"id": f"r{i}", "image": None, "instruction": "Q?", "target": "A", "env": src, "split": split}
            for i, (src, split) in enumerate(sources_and_splits)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_env_map_yaml(tmp_path):
    (tmp_path / "envs.yaml").write_text(ENV_YAML)
    env_map = load_env_map(tmp_path / "envs.yaml")
    assert env_map.env_of == {"coco": "general", "vqav2": "general", "geo170k": "reasoning",
                              "textocr": "ocr", "st_vqa": "ocr"}
    assert env_map.ood == {"ocr"}
    assert load_env_map(str(tmp_path / "envs.yaml")) == env_map


def test_env_map_assigns_environments_and_holds_out_ood(tmp_path):
    (tmp_path / "envs.yaml").write_text(ENV_YAML)
    records = [("coco", "train"), ("vqav2", "test"), ("geo170k", "train"), ("textocr", "train"), ("st_vqa", "val")]
    path = write_records(tmp_path / "d.jsonl", records)
    examples = load_examples(path, env_map=tmp_path / "envs.yaml", verbose=False)
    assert [(ex.env, ex.split, ex.ood) for ex in examples] == [
        ("general", "train", False), ("general", "test", False), ("reasoning", "train", False),
        ("ocr", "test", True), ("ocr", "test", True),
    ]
    assert env_counts(examples)["ocr"] == {"train": 0, "test": 2, "val": 0, "ood": 2, "total": 2}
    assert load_examples(path, env_map=tmp_path / "envs.yaml", split="train", verbose=False)[-1].env == "reasoning"


@pytest.mark.parametrize("text, problem", [
    ("other: 1", "'environments'"),
    ("environments: {a: {sources: []}}", "sources"),
    ("environments: {a: {sources: [x], ood: maybe}}", "ood"),
    ("environments: {a: {sources: [x], held_out: true}}", "unknown key"),
    ("environments: {a: {sources: [x]}, b: {sources: [x]}}", "both 'a' and 'b'"),
    ("environments: [unclosed", "cannot read"),
    ("environments: {a: {sources: coco}}", "environments.a.sources must be a list of names"),
    ("environments: {a: {ids: [r1, 2]}}", "environments.a.ids must be a list of names"),
    ("environments: {a: {ids: [r1]}, b: {ids: [r2, r1]}}", "record 'r1' is in both 'a' and 'b'"),
])
def test_bad_env_maps_name_the_file(tmp_path, text, problem):
    (tmp_path / "m.yaml").write_text(text)
    with pytest.raises(ConfigError, match=problem) as info:
        load_env_map(tmp_path / "m.yaml")
    assert str(tmp_path / "m.yaml") in str(info.value)


def test_a_missing_env_map_file_and_a_bad_dict_are_named(tmp_path):
    with pytest.raises(ConfigError, match="cannot read env map") as info:
        load_env_map(tmp_path / "absent.yaml")
    assert str(tmp_path / "absent.yaml") in str(info.value)
    with pytest.raises(ConfigError, match="^env map: environments.a needs a non-empty list"):
        load_env_map({"environments": {"a": {}}})


def test_an_env_map_by_record_id(tmp_path):
    env_map = load_env_map({"environments": {"a": {"ids": ["r1", "r2"]}, "b": {"sources": ["coco"], "ids": ["r3"]}}})
    assert env_map.env_of_id == {"r1": "a", "r2": "a", "r3": "b"} and env_map.env_of == {"coco": "b"}


@pytest.mark.parametrize("task, words", TASK_RULES)
def test_every_task_keyword_gives_its_task(task, words):
    for word in words:
        assert assign_task_type(f"Look at the image. {word.upper()}, please") == task
        assert assign_task_type(f"the {word}s here") == task  # plural


@pytest.mark.parametrize("instruction, task", [
    ("Describe the scene in detail.", "general"),
    ("How many dogs are there?", "general"),
    ("Who chartered the boat?", "general"),  # whole words only: 'chart' is not 'chartered'
    ("What is the text in the chart title?", "doc-chart"),  # documents/charts before OCR
    ("What is written on the sign?", "ocr"),
    ("Read the text directly and answer.", "ocr"),
    ("Find the angle ABC. Solve step by step.", "reasoning"),
    ("Compute the total shown in the table.", "doc-chart"),
])
def test_task_rule_precedence(instruction, task):
    assert assign_task_type(instruction) == task


def test_task_rules_in_the_loader_and_through_an_env_map(tmp_path):
    rows = [{"id": str(i), "image": None, "instruction": q, "target": "x"}
            for i, q in enumerate(["What is written here?", "Describe it.", "Solve for x, the angle."])]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [ex.env for ex in load_examples(path, task_rules=True, verbose=False)] == ["ocr", "general", "reasoning"]
    env_map = {"environments": {"in": {"sources": ["general", "reasoning", "doc-chart"]},
                                "held": {"sources": ["ocr"], "ood": True}}}
    examples = load_examples(path, task_rules=True, env_map=env_map, verbose=False)
    assert [(ex.env, ex.ood, ex.split) for ex in examples] == [("held", True, "test"), ("in", False, "train"),
                                                               ("in", False, "train")]
    assert set(TASK_TYPES) == {task for task, _ in TASK_RULES} | {"general"}


def test_explicit_env_column(tmp_path):
    rows = [{"id": "a", "instruction": "Q", "target": "A", "env": "ignored", "domain": 3}]
    (tmp_path / "d.jsonl").write_text(json.dumps(rows[0]) + "\n")
    assert load_examples(tmp_path / "d.jsonl", env_column="domain", verbose=False)[0].env == "3"


def make_examples(triples):
    return [Example(id=str(i), image=None, instruction="q", target="a", env=env, split=split, ood=ood)
            for i, (env, split, ood) in enumerate(triples)]


def test_env_counts_match_a_brute_force_count():
    triples = [("b", "train", False), ("a", "test", True), ("b", "val", False), ("b", "train", False),
               ("a", "test", True), ("c", "test", False)]
    counts = env_counts(make_examples(triples))
    assert list(counts) == ["a", "b", "c"]
    by_env_split = Counter((env, split) for env, split, _ in triples)
    for env, row in counts.items():
        assert {s: row[s] for s in SPLITS} == {s: by_env_split[(env, s)] for s in SPLITS}
        assert row["ood"] == sum(ood for e, _, ood in triples if e == env)
        assert row["total"] == sum(e == env for e, _, _ in triples)


def test_format_env_counts_is_an_aligned_table():
    examples = make_examples([("general", "train", False)] * 12 + [("ocr", "test", True)] * 3)
    lines = format_env_counts(examples).splitlines()
    assert len({len(line) for line in lines}) == 1  # every row the same width
    header, *rows, total = [line.split() for line in lines]
    assert header == ["env", *SPLITS, "ood", "total"]
    assert rows == [["general", *(str(env_counts(examples)["general"][c]) for c in header[1:])],
                    ["ocr", *(str(env_counts(examples)["ocr"][c]) for c in header[1:])]]
    assert total[0] == "total" and total[-1] == "15" and total[header.index("ood")] == "3"
    assert format_env_counts([]) == "no examples"
