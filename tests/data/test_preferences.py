"""Preference pairs: every layout converter on a hand-made file with the real column layout,
auto-detection, and bad input named by file and record."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from robustvlm.data.preference_layouts import LAYOUTS, detect_layout
from robustvlm.data.preferences import PairOptions, load_pairs, read_pairs
from robustvlm.data.records import SkipLog
from robustvlm.errors import ConfigError, DataError


def png(colour=(200, 30, 30), size=(12, 10)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_rlaif_v_parquet_with_embedded_images(tmp_path, capsys):
    rows = [{"ds_name": "RLAIF-V", "image": {"bytes": png(), "path": "a.jpg"}, "question": "What is red?",
             "chosen": "A red square.", "rejected": "A blue square.", "origin_dataset": "VQAv2",
             "origin_split": "train", "idx": 7, "image_path": "RLAIF-V/a.jpg"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rlaif.parquet")
    pairs = load_pairs(tmp_path / "rlaif.parquet")
    assert "layout rlaif-v" in capsys.readouterr().out  # says which layout it recognised
    (pair,) = pairs.pairs
    assert (pair.id, pair.query, pair.chosen, pair.rejected, pair.env, pair.split) == (
        "7", "What is red?", "A red square.", "A blue square.", "rlaif-v", "train")
    assert isinstance(pair.image, bytes) and pair.image == png()


def test_rlhf_v_text_holds_a_json_string(tmp_path):
    text = json.dumps({"question": "Describe it.", "chosen": "A red square.", "rejected": "A cat."})
    rows = [{"ds_name": "RLHF-V", "image": {"bytes": png(), "path": None}, "text": text,
             "origin_dataset": "UniMM-Chat", "origin_split": "train", "idx": 0, "image_path": "x.jpg"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rlhf.parquet")
    (pair,) = load_pairs(tmp_path / "rlhf.parquet", verbose=False).pairs
    assert (pair.query, pair.chosen, pair.rejected, pair.env) == ("Describe it.", "A red square.", "A cat.", "rlhf-v")
    bad = [{**rows[0], "text": "{not json"}]
    pq.write_table(pa.Table.from_pylist(bad), tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=r"bad.parquet \[0\]: field 'text' is not valid JSON"):
        load_pairs(tmp_path / "bad.parquet", verbose=False)


def _vlfeedback_completion(response, helpful, faithful, ethical="5"):
    return {"annotations": {"Helpfulness": {"Rating": helpful, "Rationale": "..."},
                            "Visual Faithfulness": {"Rating": faithful, "Rationale": "..."},
                            "Ethical Considerations": {"Rating": ethical, "Rationale": "..."}},
            "model": "m", "response": response}


def test_vlfeedback_rated_responses_become_pairs_ties_counted(tmp_path):
    (tmp_path / "img.png").write_bytes(png())
    record = {"id": "svit-1", "prompt": "What is shown?", "models": ["a", "b", "c", "d"], "img_path": "img.png",
              "completions": [_vlfeedback_completion("best", "5", "5"), _vlfeedback_completion("mid", "3", "4"),
                              _vlfeedback_completion("tied", "3", "4"), _vlfeedback_completion("unrated", "N/A", "N/A", "N/A")]}
    path = write_jsonl(tmp_path / "vlf.jsonl", [record])
    pairs = load_pairs(path, verbose=False)
    # best > mid, best > tied; mid = tied (mean 4.0 each) is a tie; "unrated" has no rating at all
    assert [(p.chosen, p.rejected) for p in pairs.pairs] == [("best", "mid"), ("best", "tied")]
    assert {p.id for p in pairs.pairs} == {"svit-1#0", "svit-1#1"}
    assert pairs.left_out == {"vlfeedback: tied mean rating": 1,
                              "vlfeedback: response without a readable mean rating": 1}
    by_faithfulness = load_pairs(path, aspect="Visual Faithfulness", verbose=False)
    assert [(p.chosen, p.rejected) for p in by_faithfulness.pairs] == [("best", "mid"), ("best", "tied")]
    # `datasets` stores a sequence of structs as a dict of lists: the same pairs
    columnar = {**record, "completions": {k: [c[k] for c in record["completions"]]
                                          for k in ("annotations", "model", "response")}}
    assert [(p.chosen, p.rejected) for p in
            load_pairs(write_jsonl(tmp_path / "col.jsonl", [columnar]), verbose=False).pairs] == \
        [("best", "mid"), ("best", "tied")]
    with pytest.raises(ConfigError, match="unknown VLFeedback aspect"):
        load_pairs(path, aspect="Beauty", verbose=False)


def test_povid_takes_coco_images_from_the_image_root(tmp_path):
    coco = tmp_path / "coco"
    coco.mkdir()
    (coco / "COCO_train2014_000000000009.jpg").write_bytes(png())
    records = [
        {"id": "p1", "image": "COCO_train2014_000000000009.jpg",
         "conversations": [{"from": "human", "value": "<image>\nWhat is on the plate?"},
                           {"from": "gpt", "value": "Broccoli."}],
         "chosen": "Broccoli.", "rejected": "Broccoli, next to a fork and a glass of wine."},
        {"id": "p2", "image": "COCO_train2014_000000000009.jpg",
         "conversations": [{"from": "human", "value": "What is this?\n<image>"}, {"from": "gpt", "value": "Food."}],
         "rejected_conversations": [{"from": "human", "value": "What is this?"}, {"from": "gpt", "value": "A car."}]},
    ]
    path = tmp_path / "povid.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(DataError, match=r"povid.json \[p1\]: image .*COCO_train2014_000000000009.jpg: file not found"):
        load_pairs(path, verbose=False)
    pairs = load_pairs(path, image_root=coco, verbose=False).pairs
    assert [(p.query, p.chosen, p.rejected) for p in pairs] == [
        ("What is on the plate?", "Broccoli.", "Broccoli, next to a fork and a glass of wine."),
        ("What is this?", "Food.", "A car."),
    ]
    assert pairs[0].image == str(coco / "COCO_train2014_000000000009.jpg")


def test_vl_rewardbench_ranks_pick_the_chosen_response(tmp_path):
    base = {"image": {"bytes": png(), "path": None}, "models": ["a", "b"], "judge": "human", "rationale": "",
            "query_source": "povid", "meta": "", "human_error_analysis": [], "ground_truth": ""}
    rows = [{**base, "id": "v1", "query": "Q1", "response": ["first", "second"], "human_ranking": [0, 1]},
            {**base, "id": "v2", "query": "Q2", "response": ["first", "second"], "human_ranking": [1, 0]},
            {**base, "id": "v3", "query": "Q3", "response": ["first", "second"], "human_ranking": [0, 0]}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "vlrb.parquet")
    pairs = load_pairs(tmp_path / "vlrb.parquet", verbose=False)
    assert [(p.id, p.chosen, p.rejected, p.split) for p in pairs.pairs] == [
        ("v1", "first", "second", "test"), ("v2", "second", "first", "test")]
    assert pairs.left_out == {"vl-rewardbench: tied human ranking": 1}
    by_source = load_pairs(tmp_path / "vlrb.parquet", env_column="query_source", verbose=False)
    assert {p.env for p in by_source.pairs} == {"povid"}


def test_multimodal_rewardbench_better_names_the_output(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "q.png").write_bytes(png())
    rows = [{"ID": "m1", "Text": "How many?", "Image": "images/q.png", "Output1": "Two.", "Output2": "Three.",
             "Better": "Output2", "Category": "counting"},
            {"ID": "m2", "Text": "How many?", "Image": "images/q.png", "Output1": "Two.", "Output2": "Three.",
             "Better": "Both"}]
    path = write_jsonl(tmp_path / "mmrb.jsonl", rows)
    log = SkipLog()
    pairs = load_pairs(path, on_bad_record="skip", skip_log=log, verbose=False).pairs
    assert [(p.id, p.chosen, p.rejected, p.split, p.env) for p in pairs] == [
        ("m1", "Three.", "Two.", "test", "mm-rewardbench")]
    assert log.rows == [{"source": str(path), "record": 2, "id": "m2",
                         "reason": "field 'Better' must be 'Output1' or 'Output2', not 'Both'"}]


def test_detection_order_and_explicit_format():
    assert [name for name in LAYOUTS] == ["preference", "rlaif-v", "povid", "rlhf-v", "vlfeedback",
                                          "vl-rewardbench", "mm-rewardbench", "mmrb2", "rmhackbench"]
    assert detect_layout({"id", "query", "chosen", "rejected", "image", "env"}).name == "preference"
    assert detect_layout({"question", "chosen", "rejected", "image"}).name == "rlaif-v"
    assert detect_layout({"Text", "Output1", "Output2", "Better", "Image"}).name == "mm-rewardbench"
    assert detect_layout({"prompt", "answer"}) is None


def test_unrecognised_columns_and_unknown_format(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"prompt": "q", "answer": "a"}])
    with pytest.raises(DataError, match=r"x.jsonl: cannot recognise a preference layout from the columns \['answer', 'prompt'\]"):
        load_pairs(path, verbose=False)
    with pytest.raises(ConfigError, match="unknown preference format 'llava'"):
        load_pairs(path, fmt="llava", verbose=False)


def test_bad_pairs_are_named_by_file_line_and_id(tmp_path):
    (tmp_path / "a.png").write_bytes(png())
    good = {"image": "a.png", "query": "What colour?", "chosen": "Red.", "rejected": "Blue.", "env": "e"}
    rows = [
        {**good, "id": "ok"},
        {**good, "id": "same", "rejected": " Red. "},
        {**good, "id": "empty", "chosen": "  "},
        {**good, "id": "noimg", "image": "missing.png"},
        {**good, "id": "none", "image": None},
        {**good, "id": "ok"},
        {**good, "id": "margin", "margin": "big"},
    ]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    errors: list[DataError] = []
    pairs = read_pairs(path, errors.append, PairOptions())
    assert [p.id for p in pairs.pairs] == ["ok"]
    assert [str(e) for e in errors] == [
        f"{path}:2: [same] chosen and rejected are the same response",
        f"{path}:3: [empty] empty chosen",
        f"{path}:4: [noimg] image {tmp_path / 'missing.png'}: file not found",
        f"{path}:5: [none] no image: a preference pair needs the image its responses describe",
        f"{path}:6: [ok] duplicate id 'ok' (first at {path}:1)",
        f"{path}:7: [margin] field 'margin' must be a number, not 'big'",
    ]
    with pytest.raises(DataError, match=r"p.jsonl:2: \[same\] chosen and rejected are the same response"):
        load_pairs(path, verbose=False)


def test_native_records_keep_env_split_and_margin(tmp_path):
    (tmp_path / "a.png").write_bytes(png())
    rows = [{"id": "1", "image": "a.png", "query": "q", "chosen": "c", "rejected": "r", "env": "x",
             "split": "validation", "margin": 2},
            {"id": "2", "image": "a.png", "query": "q", "chosen": "c", "rejected": "r", "split": "test"}]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    pairs = load_pairs(path, verbose=False).pairs
    assert [(p.env, p.split, p.margin) for p in pairs] == [("x", "val", 2.0), ("preference", "test", None)]
    assert [p.id for p in load_pairs(path, split="test", verbose=False).pairs] == ["2"]
    assert [p.env for p in load_pairs(path, env="mine", verbose=False).pairs] == ["x", "mine"]
    with pytest.raises(DataError, match=r"p.jsonl:1: \[1\] missing environment \(no 'group' field\)"):
        load_pairs(path, env_column="group", verbose=False)
