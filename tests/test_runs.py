"""Run folders: one --resume meaning, settings checked by key; resumable JSONL rows (a torn last
line is an interruption, any other bad line is damage)."""

from __future__ import annotations

import json

import pytest

from robustvlm.config import TrainConfig
from robustvlm.errors import ConfigError, DataError
from robustvlm.runs import CONFIG_FILE, append_jsonl, claim_run_folder, differing_keys, read_jsonl


def test_missing_file_is_empty(tmp_path):
    assert read_jsonl(tmp_path / "none.jsonl") == []


def test_torn_last_line_is_dropped_and_the_file_repaired(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a"}\n{"id": "é"}\n{"id": "c", "sco', encoding="utf-8")
    assert read_jsonl(path) == [{"id": "a"}, {"id": "é"}]
    assert path.read_text(encoding="utf-8") == '{"id": "a"}\n{"id": "é"}\n'
    with path.open("a", encoding="utf-8") as f:  # appending continues on a clean line
        f.write(json.dumps({"id": "c"}) + "\n")
    assert [r["id"] for r in read_jsonl(path)] == ["a", "é", "c"]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}', encoding="utf-8")
    assert read_jsonl(path) == [{"id": "a"}, {"id": "b"}]
    assert path.read_text(encoding="utf-8").endswith('{"id": "b"}\n')


def test_bad_middle_line_names_file_and_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 2 is not valid JSON") as info:
        read_jsonl(path)
    assert info.value.source == str(path) and info.value.record == 2


def test_append_then_read_round_trips(tmp_path):
    path = tmp_path / "rows.jsonl"
    with path.open("w", encoding="utf-8") as log:
        append_jsonl(log, [{"id": "a", "x": [1, 2]}, {"id": "é"}])
    assert read_jsonl(path) == [{"id": "a", "x": [1, 2]}, {"id": "é"}]


def test_differing_keys_are_dotted_and_may_differ_is_honoured():
    saved = {"train": {"lr": 1e-3, "steps": 10}, "method": "erm", "tags": [1, 2]}
    now = {"train": {"lr": 2e-3, "steps": 10, "new": 1}, "method": "irm", "tags": [1, 3]}
    assert differing_keys(saved, now) == ["method", "tags", "train.lr", "train.new"]
    assert differing_keys(saved, now, may_differ=("train", "tags")) == ["method"]


def test_claim_gives_resume_one_meaning(tmp_path):
    run, cfg = tmp_path / "run", TrainConfig(steps=5)
    claim_run_folder(run, cfg, resume=False)  # a new folder
    stored = (run / CONFIG_FILE).read_text()
    assert "steps: 5" in stored and "lr:" in stored  # every default filled in
    with pytest.raises(ConfigError, match="already holds a run.*pass --resume"):
        claim_run_folder(run, cfg, resume=False)
    claim_run_folder(run, cfg, resume=True)  # same settings: continue
    with pytest.raises(ConfigError, match=r"differs in \['lr', 'steps'\] \(saved \[3e-05, 5\], now \[0.1, 6\]\)"):
        claim_run_folder(run, TrainConfig(steps=6, lr=0.1), resume=True)
    claim_run_folder(run, TrainConfig(steps=5, batch_size=2), resume=True, may_differ=("batch_size",))
    other = tmp_path / "other"
    other.mkdir()
    (other / "predictions.jsonl").write_text("{}\n")
    with pytest.raises(ConfigError, match="settings they were made with are unknown"):
        claim_run_folder(other, cfg, resume=True)
