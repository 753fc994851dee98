"""Run folders: one --resume meaning, settings checked by key; resumable JSONL rows (a torn last
line is an interruption, any other bad line is damage)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from robustvlm.config import TrainConfig
from robustvlm.errors import ConfigError, DataError
from robustvlm.runs import (
    CONFIG_FILE,
    LOCK_FILE,
    append_jsonl,
    claim_run_folder,
    differing_keys,
    read_jsonl,
    release_run_folders,
)


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
    claim_run_folder(run, cfg, command="test", resume=False)  # a new folder
    stored = (run / CONFIG_FILE).read_text()
    assert "steps: 5" in stored and "lr:" in stored  # every default filled in
    (run / "train_log.jsonl").write_text('{"step": 1}\n')  # finished work: the folder is taken
    with pytest.raises(ConfigError, match="already holds a `robustvlm test` run.*pass --resume"):
        claim_run_folder(run, cfg, command="test", resume=False)
    claim_run_folder(run, cfg, command="test", resume=True)  # same settings: continue
    with pytest.raises(ConfigError, match=r"differs in \['lr', 'steps'\] \(saved \[3e-05, 5\], now \[0.1, 6\]\)"):
        claim_run_folder(run, TrainConfig(steps=6, lr=0.1), command="test", resume=True)
    claim_run_folder(run, TrainConfig(steps=5, batch_size=2), command="test", resume=True, may_differ=("batch_size",))
    other = tmp_path / "other"
    other.mkdir()
    (other / "predictions.jsonl").write_text("{}\n")
    with pytest.raises(ConfigError, match="holds files robustvlm did not write"):
        claim_run_folder(other, cfg, command="test", resume=True)


def test_a_folder_whose_run_finished_nothing_is_free_again(tmp_path):
    """Issue 17.3: a run that failed validation or setup left its settings (and a prepared
    benchmark) behind; the corrected command is accepted with and without --resume."""
    run = tmp_path / "run"
    claim_run_folder(run, {"data": {"benchmark": "tasks", "seed": 1}, "model": {"name": "tiny:idefics3"}}, command="test", resume=False)
    for prepared in ("data", "base"):  # prepared from the failed run's settings
        (run / prepared).mkdir()
        (run / prepared / "x.json").write_text("{}")
    (run / "train_log.jsonl").write_text("")  # opened, nothing written
    claim_run_folder(run, {"data": {"benchmark": "tasks", "seed": 0}, "model": {"name": "tiny:idefics3"}}, command="test", resume=False)
    assert "seed: 0" in (run / CONFIG_FILE).read_text()
    assert not (run / "data").exists() and not (run / "base").exists()  # rebuilt for these settings
    claim_run_folder(run, {"data": {"path": "mine"}, "model": {"name": "tiny:idefics3"}}, command="test", resume=True)
    assert "path: mine" in (run / CONFIG_FILE).read_text()


def test_folders_the_stored_settings_did_not_make_are_never_removed(tmp_path):
    """A user's own data/ beside a failed run's settings: that run named no built-in benchmark
    and no tiny model, so neither data/ nor base/ was its to remove."""
    run = tmp_path / "run"
    claim_run_folder(run, {"data": {"path": "data/mine.jsonl"}, "model": {"name": "org/vlm"}}, command="test", resume=False)
    for mine in ("data", "base"):
        (run / mine).mkdir()
        (run / mine / "mine.jsonl").write_text("{}\n")
    claim_run_folder(run, {"data": {"path": "data/other.jsonl"}, "model": {"name": "org/vlm"}}, command="test", resume=False)
    assert (run / "data" / "mine.jsonl").is_file() and (run / "base" / "mine.jsonl").is_file()


def test_paths_compare_resolved_on_resume(tmp_path, monkeypatch):
    """Issue 17.9: `runs/base` and its absolute spelling are one setting."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "m").mkdir(parents=True)
    run = tmp_path / "run"
    claim_run_folder(run, {"model": "models/m", "method": "erm"}, command="test", resume=False)
    (run / "rows.jsonl").write_text("{}\n")
    claim_run_folder(run, {"model": str(tmp_path / "models" / "m"), "method": "erm"}, command="test", resume=True)
    claim_run_folder(run, {"model": "./models/../models/m", "method": "erm"}, command="test", resume=True)
    with pytest.raises(ConfigError, match=r"differs in \['model'\]"):
        claim_run_folder(run, {"model": "models/other", "method": "erm"}, command="test", resume=True)


def test_a_torn_multibyte_character_is_dropped_on_resume(tmp_path):
    """Issue 17.8: the cut fell inside a UTF-8 sequence (é is two bytes)."""
    path = tmp_path / "rows.jsonl"
    whole = b'{"id": "a"}\n' + '{"id": "é"}'.encode()
    path.write_bytes(whole[:-3])  # ends with the first byte of é
    assert read_jsonl(path) == [{"id": "a"}]
    assert path.read_bytes() == b'{"id": "a"}\n'
    path.write_bytes(b'{"id": "a"}\n{"id": "\xc3"}\n{"id": "b"}\n')  # damage, not a torn end
    with pytest.raises(DataError, match="line 2"):
        read_jsonl(path)


HOLDER = textwrap.dedent(
    """
    import sys, time
    from robustvlm.runs import claim_run_folder
    claim_run_folder(sys.argv[1], {"a": 1}, command="test", resume=True)
    print("held", flush=True)
    time.sleep(60)
    """
)


def test_a_second_writer_stops_at_once_naming_the_holder_and_a_killed_holder_frees_it(tmp_path):
    """Issue 17.2: every writer locks its folder; the lock dies with its process."""
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run), "--out", "http://user:sekrit@host/v1"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=rf"being written by process {holder.pid} "):
            claim_run_folder(run, {"a": 1}, command="test", resume=True)
        assert "sekrit" not in (run / LOCK_FILE).read_text()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    claim_run_folder(run, {"a": 1}, command="test", resume=True)  # free once the holder is dead
    assert f"process {os.getpid()} " in (run / LOCK_FILE).read_text()
    release_run_folders()


def test_redact_removes_userinfo_from_urls():
    from robustvlm.redact import redact

    assert redact("--server http://bob:k3y@h:8000/v1 x") == "--server http://***@h:8000/v1 x"
    assert redact("http://h/v1") == "http://h/v1"
