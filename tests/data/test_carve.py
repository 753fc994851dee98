"""Per-environment train/test carving and multi-subset hub loading (the paper's data recipe)."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from PIL import Image

from robustvlm.config import validate_config
from robustvlm.data.carve import carve_per_env, record_key, short_environments
from robustvlm.data.from_config import load_from_config
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError


def _examples(env: str, n_records: int, turns: int = 2, ood: bool = False) -> list[Example]:
    return [
        Example(f"{env}-{r}#{t}", None, f"q{t}", f"a{t}", env, "train", ood)
        for r in range(n_records)
        for t in range(turns)
    ]


def test_record_key_strips_only_a_numeric_turn():
    assert record_key("abc#3") == "abc"
    assert record_key("a#b") == "a#b"
    assert record_key("plain") == "plain"


def test_carve_sizes_disjoint_and_turns_together():
    examples = _examples("general", 10) + _examples("math", 4) + _examples("ocr", 6, ood=True)
    kept, counts = carve_per_env(examples, train=5, test=3, seed=7)
    sides: dict[tuple[str, str], set[str]] = {}
    for ex in kept:
        sides.setdefault((ex.env, record_key(ex.id)), set()).add(ex.split)
    assert all(len(s) == 1 for s in sides.values())  # both turns of a record on one side
    per_env = Counter((env, next(iter(s))) for (env, _), s in sides.items())
    assert per_env == {
        ("general", "test"): 3,
        ("general", "train"): 5,
        ("math", "test"): 3,
        ("math", "train"): 1,
        ("ocr", "test"): 3,
    }
    assert counts["math"] == {"records": 4, "wanted": 8, "train": 1, "test": 3}
    assert short_environments(counts) == [
        "environment 'math' has 4 records, fewer than the 8 asked for: 1 train / 3 test"
    ]
    assert [ex.id for ex in kept] == [
        ex.id for ex in examples if (ex.env, record_key(ex.id)) in sides
    ]


def test_carve_is_seeded_and_train_none_takes_the_rest():
    examples = _examples("general", 20, turns=1)
    a, _ = carve_per_env(examples, train=None, test=4, seed=1)
    b, _ = carve_per_env(examples, train=None, test=4, seed=1)
    c, _ = carve_per_env(examples, train=None, test=4, seed=2)
    assert a == b and len(a) == 20
    assert Counter(ex.split for ex in a) == {"test": 4, "train": 16}
    assert {ex.id for ex in a if ex.split == "test"} != {ex.id for ex in c if ex.split == "test"}


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (9, 99, 199)).save(buf, format="PNG")
    return buf.getvalue()


def _subset(name: str, n: int):
    import datasets

    image = {"bytes": _png(), "path": None}
    return datasets.Dataset.from_dict(
        {
            "id": [f"{name}-{i}" for i in range(n)],
            "image": [image] * n,
            "conversations": [
                [
                    {"from": "human", "value": "<image>Q1?"},
                    {"from": "gpt", "value": "A1"},
                    {"from": "human", "value": "Q2?"},
                    {"from": "gpt", "value": "A2"},
                ]
            ]
            * n,
            "data_source": ["whatever"] * n,
        },
        features=datasets.Features(
            {
                "id": datasets.Value("string"),
                "image": datasets.Image(),
                "conversations": [
                    {"from": datasets.Value("string"), "value": datasets.Value("string")}
                ],
                "data_source": datasets.Value("string"),
            }
        ),
    )


def test_hub_subsets_sampled_tagged_and_carved(tmp_path, monkeypatch):
    import datasets

    hub = {"chartqa(cauldron,llava_format)": _subset("chart", 30), "iiit5k": _subset("ocr", 12)}
    calls = []

    def fake_load_dataset(name, config, split):
        calls.append((name, config, split))
        return hub[config]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    env_map = {
        "environments": {
            "doc/chartqa": {"sources": ["chartqa(cauldron,llava_format)"]},
            "ocr/iiit5k": {"sources": ["iiit5k"], "ood": True},
        }
    }
    (tmp_path / "map.yaml").write_text(__import__("yaml").safe_dump(env_map), encoding="utf-8")
    cfg = validate_config(
        {
            "data": {
                "path": "hf:lmms-lab/LLaVA-OneVision-Data",
                "subsets": list(hub),
                "env_column": "subset",
                "env_map": str(tmp_path / "map.yaml"),
                "max_rows_per_subset": 20,
                "seed": 3,
                "split_per_env": {"train": 8, "test": 5},
            }
        }
    ).data
    examples = load_from_config(cfg, tmp_path, verbose=False)

    assert calls == [("lmms-lab/LLaVA-OneVision-Data", s, "train") for s in hub]
    # The row sample is datasets' own seeded shuffle: the same 20 records, computed directly.
    sampled = set(hub["chartqa(cauldron,llava_format)"].shuffle(seed=3).select(range(20))["id"])
    chart = [ex for ex in examples if ex.env == "doc/chartqa"]
    assert {record_key(ex.id) for ex in chart} <= sampled
    assert Counter(ex.split for ex in chart) == {"train": 16, "test": 10}  # 2 turns per record
    ocr = [ex for ex in examples if ex.env == "ocr/iiit5k"]
    assert len(ocr) == 10 and all(ex.ood and ex.split == "test" for ex in ocr)
    assert ocr[0].source == "hf:lmms-lab/LLaVA-OneVision-Data:iiit5k"
    assert load_from_config(cfg, tmp_path, verbose=False) == examples


def test_subsets_need_a_hub_path():
    with pytest.raises(
        ConfigError, match="subsets and max_rows_per_subset need data.path: hf:NAME"
    ):
        validate_config({"data": {"path": "data.jsonl", "subsets": ["a"]}})
    with pytest.raises(ConfigError, match="split_per_env.test"):
        validate_config({"data": {"benchmark": "tasks", "split_per_env": {"train": 3}}})


def test_hold_out_sets_aside_the_out_split_of_every_environment():
    from dataclasses import replace

    from robustvlm.data.carve import hold_out

    ood = [replace(e, split="test") for e in _examples("ocr", 10, ood=True)]
    own_val = _examples("chart", 6) + [replace(e, split="val") for e in _examples("chart-v", 2)]
    own_val = [replace(e, env="chart") for e in own_val]
    examples = _examples("general", 10) + own_val + ood
    held = hold_out(examples, 0.2, seed=3)
    assert [e.id for e in held] == [e.id for e in examples]  # input order, nothing dropped
    sides: dict[tuple[str, str], set[str]] = {}
    for ex in held:
        sides.setdefault((ex.env, record_key(ex.id)), set()).add(ex.split)
    assert all(len(s) == 1 for s in sides.values())  # turns of a record stay together
    per_env = Counter((env, next(iter(s))) for (env, _), s in sides.items())
    # general: 2 of 10 training records held out; chart keeps its own 2 val records and all
    # 6 training ones; ocr (out-of-domain): 2 of 10 test records become the oracle's part
    assert per_env == {
        ("general", "train"): 8,
        ("general", "val"): 2,
        ("chart", "train"): 6,
        ("chart", "val"): 2,
        ("ocr", "test"): 8,
        ("ocr", "val"): 2,
    }
    assert hold_out(examples, 0.2, seed=3) == held
    assert hold_out(examples, 0.2, seed=4) != held


def test_holdout_fraction_is_validated_and_applied_by_load_from_config(tmp_path):
    with pytest.raises(ConfigError, match="holdout_fraction"):
        validate_config({"data": {"benchmark": "spurious", "holdout_fraction": 1.5}})
    cfg = validate_config(
        {"data": {"benchmark": "spurious", "n_per_env": 8, "holdout_fraction": 0.25}}
    )
    counts = Counter((e.env, e.split) for e in load_from_config(cfg.data, tmp_path, verbose=False))
    assert counts[("train-0.9", "val")] == 2 and counts[("train-0.9", "train")] == 8  # own val kept
    assert counts[("test-reversed", "val")] == 2 and counts[("test-reversed", "test")] == 6
