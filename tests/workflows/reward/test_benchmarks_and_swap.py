"""Reward benchmarks in their authors' layouts (VL-RewardBench parquet, Multimodal RewardBench's
all_data.json), reported per category; and the swap check of `rm eval` and `rm matrix`."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from robustvlm.analysis.reward import shortcut_failure_degradation, summarize_pair_rows, swap_check
from robustvlm.cli import main
from robustvlm.config import RewardEvalConfig
from robustvlm.data.preferences import load_pairs
from robustvlm.errors import DataError
from robustvlm.model_ref import ModelRef
from robustvlm.reward import scoring
from robustvlm.workflows.reward.evaluate import evaluate_reward_model

VL_SOURCES = ["WildVision", "povid", "RLAIF-V", "rlhf-v", "MMMU-Pro", "MathVerse"]
MM_RECORDS = [  # (ID, Category) as Multimodal RewardBench's all_data.json has them
    ("nocaps_1", "open_generation/correctness_task"), ("visitbench_2", "open_generation/preference_task"),
    ("mmmu_3", "knowledge"), ("math_4", "reasoning"), ("emma_5", "reasoning"), ("pairs_6", "safety"),
    ("hateful_7", "safety"), ("realworldqa_8", "vqa"),
]


def _png(colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), colour).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def vl_rewardbench(tmp_path_factory):
    """A VL-RewardBench test split as the hub's parquet has it: image as {bytes, path}, two
    responses, human_ranking ([0, 1]: the first is preferred), query_source."""
    folder = tmp_path_factory.mktemp("vlrb")
    rows = [{"id": f"vl{i}", "query": f"What is shown in picture {i}?",
             "response": [f"A red square {i}.", f"A blue circle {i}."],
             "image": {"bytes": _png("red"), "path": f"{i}.png"},
             "human_ranking": [0, 1] if i % 2 == 0 else [1, 0], "models": ["m1", "m2"], "judge": "human",
             "rationale": "", "query_source": source, "meta": "{}", "human_error_analysis": [],
             "ground_truth": ""} for i, source in enumerate(VL_SOURCES * 2)]
    path = folder / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture(scope="module")
def mm_rewardbench(tmp_path_factory):
    """Multimodal RewardBench's data/ folder: all_data.json (a JSON list) and images/."""
    folder = tmp_path_factory.mktemp("mmrb")
    (folder / "images").mkdir()
    records = []
    for k, (rid, category) in enumerate(MM_RECORDS):
        (folder / "images" / f"{rid}.png").write_bytes(_png("blue"))
        records.append({"ID": rid, "Image": f"images/{rid}.png", "Text": f"Describe picture {k}.",
                        "Output1": f"It is blue {k}.", "Output2": f"It is green {k}.",
                        "Better": "Output1" if k % 2 else "Output2", "Category": category})
    (folder / "all_data.json").write_text(json.dumps(records), encoding="utf-8")
    return folder / "all_data.json"


def test_vl_rewardbench_categories_follow_the_paper(vl_rewardbench):
    pairs = load_pairs(vl_rewardbench, fmt="vl-rewardbench", verbose=False).pairs
    assert [p.category for p in pairs[:6]] == ["general", "hallucination", "hallucination", "hallucination",
                                                "reasoning", "reasoning"]
    assert pairs[0].chosen == "A red square 0." and pairs[1].chosen == "A blue circle 1."
    assert all(p.split == "test" and p.env == "vl-rewardbench" for p in pairs)


def test_mm_rewardbench_categories_follow_its_accuracy_script(mm_rewardbench):
    pairs = load_pairs(mm_rewardbench, verbose=False).pairs  # layout recognised from the columns
    assert [p.category for p in pairs] == [
        "open_generation/correctness_task", "open_generation/preference_task", "knowledge",
        "reasoning/math", "reasoning/coding", "safety/bias", "safety/toxicity", "vqa"]
    assert pairs[0].chosen == "It is green 0." and pairs[1].chosen == "It is blue 1."


def test_rm_eval_reports_each_category_with_the_text_only_test(reward_folder, vl_rewardbench, tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["rm", "eval", "--model", str(reward_folder), "--data", str(vl_rewardbench),
                 "--format", "vl-rewardbench", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| category |" in printed and "| hallucination |" in printed and "macro average over 3" in printed
    saved = json.loads((out / "metrics.json").read_text())
    rows = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    for category in ("general", "hallucination", "reasoning"):  # against a count by hand
        mine = [r for r in rows if r["category"] == category]
        by_hand = np.mean([r["multimodal"][0] > r["multimodal"][1] for r in mine])
        assert saved["per_category"][category]["multimodal"]["accuracy"] == pytest.approx(by_hand)
        assert saved["per_category"][category]["drop"]["n"] == len(mine)
        sfd = shortcut_failure_degradation([r["multimodal"][0] > r["multimodal"][1] for r in mine],
                                           [r["drop"][0] > r["drop"][1] for r in mine])
        assert saved["text_sfd"][f"category:{category}"] == sfd.to_dict()
    macro = np.mean([saved["per_category"][c]["multimodal"]["accuracy"] for c in saved["per_category"]])
    assert saved["category_macro"] == pytest.approx(macro)


def test_swap_check_by_hand():
    rows = [{"id": "a", "m": [2.0, 1.0], "swapped": [1.0, 2.0]},
            {"id": "b", "m": [0.5, 0.5], "swapped": [0.5, 0.5]},
            {"id": "c", "m": [-1.0, 3.0], "swapped": [3.0, -1.0]}]
    check = swap_check(rows, "m")
    assert (check.accuracy, check.ties, check.n) == (pytest.approx(1 / 3), pytest.approx(1 / 3), 3)
    assert check.swapped_accuracy == pytest.approx(1 / 3) == pytest.approx(check.expected)
    broken = [*rows[:1], {"id": "d", "m": [2.0, 1.0], "swapped": [2.0, 1.0]}, *rows[1:]]
    with pytest.raises(DataError, match="swap check failed at pair 'd'"):
        swap_check(broken, "m")


def test_rm_eval_swap_check_holds_and_catches_a_broken_pairing(reward_folder, mm_rewardbench, tmp_path,
                                                                 monkeypatch, capsys):
    pairs = load_pairs(mm_rewardbench, verbose=False).pairs
    metrics = evaluate_reward_model(ModelRef.folder(reward_folder), pairs, tmp_path / "ok", cfg=RewardEvalConfig(n_boot=100),
                                    data={"path": str(mm_rewardbench)}, progress=False)
    swap = metrics.swap
    assert swap is not None and swap.n == len(pairs)
    assert swap.swapped_accuracy == pytest.approx(1 - metrics.overall["multimodal"].accuracy
                                                  - metrics.overall["multimodal"].ties)

    # A data path that always puts the first-read response in front (the ms-swift bug: accuracy
    # unchanged after swapping chosen and rejected) is stopped at the first pair.
    real = scoring.candidate_rewards

    def always_first(model, processor, query, responses, **options):
        scores = real(model, processor, query, responses, **options)
        return sorted(scores, reverse=True)

    monkeypatch.setattr(scoring, "candidate_rewards", always_first)
    code = main(["rm", "eval", "--model", str(reward_folder), "--data", str(mm_rewardbench),
                 "--out", str(tmp_path / "broken"), "--no-text-only-test"])
    err = capsys.readouterr().err
    assert code == 2 and f"swap check failed at pair '{pairs[0].id}'" in err and "Traceback" not in err


def test_summary_without_swap_or_text_view_stays_as_before():
    rows = [{"id": "a", "env": "e", "m": [1.0, 0.0]}, {"id": "b", "env": "e", "m": [0.0, 1.0]}]
    metrics = summarize_pair_rows(rows, ["m"], "m", n_boot=100)
    assert metrics.per_category == {} and metrics.text_sfd == {} and metrics.swap is None
    assert type(metrics).from_dict(metrics.to_dict()) == metrics
