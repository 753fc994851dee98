"""`rm data check`: bad records, the layout said, and train / test overlap by image content and
by query."""

from __future__ import annotations

import json

from PIL import Image

from robustvlm.cli import main
from robustvlm.data.preference_check import check_pairs


def test_overlap_by_image_content_and_query(tmp_path):
    Image.new("RGB", (8, 8), (10, 200, 10)).save(tmp_path / "train.png")
    Image.new("RGB", (8, 8), (10, 200, 10)).save(tmp_path / "copy.png")  # same pixels, other name
    Image.new("RGB", (8, 8), (200, 10, 10)).save(tmp_path / "other.png")
    train = [{"id": "t1", "image": "train.png", "query": "What colour is it?", "chosen": "Green.", "rejected": "Red."}]
    test = [{"id": "s1", "image": "copy.png", "query": "Which shape?", "chosen": "A square.", "rejected": "A dot."},
            {"id": "s2", "image": "other.png", "query": "what  colour is IT?", "chosen": "Red.", "rejected": "Blue."},
            {"id": "s3", "image": "other.png", "query": "Anything?", "chosen": "Yes.", "rejected": "No."}]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    (tmp_path / "test.jsonl").write_text("".join(json.dumps({**r, "split": "test"}) + "\n" for r in test))
    report = check_pairs(tmp_path / "train.jsonl", test_path=tmp_path / "test.jsonl")
    assert report.ok and report.overlap.n_test == 3
    assert (report.overlap.same_image, report.overlap.same_query, report.overlap.both) == (["s1"], ["s2"], [])
    text = report.format()
    assert "layout preference" in text and "same image: 1 (e.g. s1)" in text and "same query: 1 (e.g. s2)" in text


def test_cli_exit_status_and_bad_records(tmp_path, capsys):
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    rows = [{"id": "1", "image": "a.png", "query": "q", "chosen": "yes", "rejected": "no", "env": "e"},
            {"id": "2", "image": "a.png", "query": "q", "chosen": "same", "rejected": "same", "env": "e"},
            {"id": "3", "image": "gone.png", "query": "q", "chosen": "yes", "rejected": "no", "env": "e"}]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:1]))
    assert main(["rm", "data", "check", str(path)]) == 0
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["rm", "data", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "1 good pair(s), 2 bad record(s)" in out
    assert f"{path}:2: [2] chosen and rejected are the same response" in out
    assert f"{path}:3: [3] image {tmp_path / 'gone.png'}: file not found" in out
    assert main(["rm", "data", "check", str(path), "--format", "nope"]) == 2
    assert "unknown preference format 'nope'" in capsys.readouterr().err
