"""Multimodal RewardBench 2 and RMHackBench records as their authors lay them out (MMRB2's
`benchmark/build_from_hf.py` output: `<task>.json` = {"pairs": [...]} with content parts and
`input_images/`; RMHackBench's hub parquet: id, query, image, image_id, responses, answer,
source), read by `rm eval` and `rm data check`; a malformed record is one line naming file and
record."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from robustvlm.cli import main
from robustvlm.data.preferences import load_pairs
from robustvlm.errors import DataError


def _png(colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def _mmrb2_pair(i: int, chosen: str, prompt_images: int = 1, response_image: bool = False) -> dict:
    """One pair as build_from_hf.convert_hf_to_benchmark_format writes it."""
    pid = f"blink_val_{i}"
    prompt = [["text", f"Which picture is real? ({i})"],
              *(["image", f"input_images/{pid}_prompt_{k}.png"] for k in range(prompt_images))]
    extra = [["image", f"images/{pid}_a_0.png"]] if response_image else []
    return {"id": pid, "prompt_content": prompt, "prompt_source": "blink", "prompt_metadata": {"id": str(i)},
            "response_a": {"model_name": "GPT5", "response_content": [["text", f"The first one {i}."], *extra]},
            "response_b": {"model_name": "O3", "response_content": [["text", f"The second one {i}."]]},
            "chosen": chosen}


@pytest.fixture
def mmrb2(tmp_path):
    """reasoning.json with input_images/: 4 scorable pairs and 3 robustvlm cannot score."""
    (tmp_path / "input_images").mkdir()
    pairs = [_mmrb2_pair(0, "A"), _mmrb2_pair(1, "B"), _mmrb2_pair(2, "A"), _mmrb2_pair(3, "B"),
             _mmrb2_pair(4, "A", response_image=True), _mmrb2_pair(5, "B", prompt_images=2), _mmrb2_pair(6, "")]
    for pair in pairs:
        for kind, content in pair["prompt_content"]:
            if kind == "image":
                (tmp_path / content).write_bytes(_png("red"))
    path = tmp_path / "reasoning.json"
    path.write_text(json.dumps({"pairs": pairs}, indent=2), encoding="utf-8")
    return path


def test_mmrb2_pairs_read_as_its_accuracy_script_counts_them(mmrb2):
    read = load_pairs(mmrb2, verbose=False)  # layout recognised from the fields
    assert read.layouts == {str(mmrb2): "mmrb2"}
    assert [(p.id, p.chosen, p.rejected) for p in read.pairs] == [
        ("blink_val_0", "The first one 0.", "The second one 0."), ("blink_val_1", "The second one 1.", "The first one 1."),
        ("blink_val_2", "The first one 2.", "The second one 2."), ("blink_val_3", "The second one 3.", "The first one 3.")]
    assert read.pairs[0].query == "Which picture is real? (0)"
    assert read.pairs[0].image == str(mmrb2.parent / "input_images" / "blink_val_0_prompt_0.png")
    assert {p.category for p in read.pairs} == {"reasoning"} and {p.split for p in read.pairs} == {"test"}
    assert read.left_out == {"mmrb2: responses hold images (robustvlm's reward models score text)": 1,
                             "mmrb2: prompt with 2 image(s) (robustvlm scores one per pair)": 1,
                             "mmrb2: pair without a human preference": 1}


def test_mmrb2_malformed_record_is_one_line_naming_file_and_record(mmrb2, capsys):
    data = json.loads(mmrb2.read_text())
    data["pairs"][2]["chosen"] = "C"
    mmrb2.write_text(json.dumps(data))
    with pytest.raises(DataError) as err:
        load_pairs(mmrb2, verbose=False)
    assert str(mmrb2) in str(err.value) and "blink_val_2" in str(err.value) and "'chosen' must be 'A' or 'B'" in str(err.value)
    data["pairs"][2] = {**_mmrb2_pair(2, "A"), "prompt_content": "Which picture is real?"}
    mmrb2.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["rm", "data", "check", str(mmrb2)]) == 1  # the check lists every bad record, one line each
    [line] = [text for text in capsys.readouterr().out.splitlines() if "blink_val_2" in text]
    assert str(mmrb2) in line and "field 'prompt_content' must be a list" in line


@pytest.fixture
def rmhackbench(tmp_path):
    """A subset's test parquet as the hub has it; answer as ranks ([0, 1]: the first preferred)
    or one index, and one tie."""
    rows = [{"id": f"P1_{i}", "query": f"What does chart {i} show?", "image": {"bytes": _png("blue"), "path": None},
             "image_id": f"chart_{i}", "responses": [f"Sales rose {i}.", f"Sales rose {i}, as any expert would agree."],
             "answer": answer, "source": "chart"} for i, answer in enumerate([[0, 1], [1, 0], [0], [1], [0, 0]])]
    path = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_rmhackbench_ranks_pick_the_chosen_response(rmhackbench):
    read = load_pairs(rmhackbench, verbose=False)
    assert read.layouts == {str(rmhackbench): "rmhackbench"}
    assert [p.chosen for p in read.pairs] == ["Sales rose 0.", "Sales rose 1, as any expert would agree.",
                                              "Sales rose 2.", "Sales rose 3, as any expert would agree."]
    assert {p.category for p in read.pairs} == {"chart"} and read.left_out == {"rmhackbench: tied ranks": 1}


def test_rmhackbench_malformed_answer_names_file_and_record(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "T1_9", "query": "q", "image": "x.png", "responses": ["a", "b"],
                                "answer": "A", "source": "chart"}) + "\n")
    with pytest.raises(DataError) as err:
        load_pairs(path, verbose=False)
    assert str(path) in str(err.value) and "T1_9" in str(err.value) and "'answer'" in str(err.value)
    assert "\n" not in str(err.value)


def test_rm_eval_reads_both_layouts(reward_folder, mmrb2, rmhackbench, tmp_path, capsys):
    for data, n in ((mmrb2, 4), (rmhackbench, 4)):
        out = tmp_path / data.stem
        assert main(["rm", "eval", "--model", str(reward_folder), "--data", str(data), "--out", str(out)]) == 0
        rows = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
        assert len(rows) == n
    assert "| category |" in capsys.readouterr().out
