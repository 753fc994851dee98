"""`robustvlm icl eval` end to end: results and predictions written, a killed run resumed without
recomputation, and resume refusing other settings."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from robustvlm.data.synth import synthesize
from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation.icl_settings import InContextSettings
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import VLMBackend
from robustvlm.workflows.measure import icl_eval as icl_run


def test_run_icl_writes_results(tmp_path):
    root = tmp_path / "data"
    synthesize("domains", root, n_per_env=2)
    result = icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", tmp_path / "out",
                             InContextSettings(shots=(0, 1), policies=("same-domain",), n_per_env=1, seed=0))
    saved = json.loads((tmp_path / "out" / "icl_results.json").read_text())
    assert saved == {**json.loads(json.dumps(result.to_dict())), "machine": saved["machine"]}
    assert saved["machine"]["cpu"] and saved["machine"]["torch"]["threads"] >= 1  # the machine that measured it
    assert {r["domain"] for r in saved["rows"]} == {"photo", "sketch", "cartoon", "noisy", "all"}
    assert "| 1 | same-domain |" in (tmp_path / "out" / "icl_results.md").read_text()
    lines = (tmp_path / "out" / "icl_predictions.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 4  # two cells x four domains x one query


_GENERATE_CHATS = VLMBackend.generate_chats  # unpatched


class _Killed(Exception):
    """Stands in for a kill in the middle of a run."""


def _counting_generate(monkeypatch, calls: list[int], kill_on_call: int | None = None):
    """Patch the local backend's generate_chats to record the number of prompts of each call (and
    die on one)."""
    def generate(self, prompts, **kwargs):
        if kill_on_call is not None and len(calls) + 1 == kill_on_call:
            raise _Killed
        calls.append(len(prompts))
        return _GENERATE_CHATS(self, prompts, **kwargs)

    monkeypatch.setattr(VLMBackend, "generate_chats", generate)


def test_killed_run_resumes_without_recomputing(tmp_path, monkeypatch):
    root = tmp_path / "data"
    synthesize("domains", root, n_per_env=2)
    settings = InContextSettings(shots=(0, 1), policies=("random", "same-domain"), n_per_env=2, seed=0, batch_size=4)
    n_records = 3 * 4 * 2  # three cells x four domains x two queries

    whole: list[int] = []
    _counting_generate(monkeypatch, whole)
    expected = icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", tmp_path / "whole", settings, progress=False)
    assert sum(whole) == n_records

    out = tmp_path / "killed"
    _counting_generate(monkeypatch, [], kill_on_call=3)
    with pytest.raises(_Killed):
        icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", out, settings, progress=False)
    log = out / icl_run.PREDICTIONS_FILE
    kept = log.read_text().splitlines()
    assert len(kept) == 8  # two batches of four were written before the kill
    with log.open("a") as f:  # and the kill tore the next line
        f.write(json.dumps({"shots": 1, "policy": "random", "id": "x", "answer": "circ"})[:30])

    resumed: list[int] = []
    _counting_generate(monkeypatch, resumed)
    result = icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", out, settings, resume=True, progress=False)
    assert sum(resumed) == n_records - len(kept)
    assert result == expected
    assert (out / "icl_results.json").read_text() == (tmp_path / "whole" / "icl_results.json").read_text()
    assert log.read_text() == (tmp_path / "whole" / icl_run.PREDICTIONS_FILE).read_text()

    again: list[int] = []  # a finished run resumes to the same results with no generation at all
    _counting_generate(monkeypatch, again)
    assert icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", out, settings, resume=True, progress=False) == expected
    assert again == []


def test_resume_refuses_other_settings(tmp_path):
    root = tmp_path / "data"
    synthesize("domains", root, n_per_env=2)
    out = tmp_path / "out"
    settings = InContextSettings(shots=(0, 1), policies=("random",), n_per_env=1, seed=0)
    icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", out, settings, progress=False)
    with pytest.raises(ConfigError, match="pass --resume"):  # a finished run is never overwritten
        icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", out, settings, progress=False)
    with pytest.raises(ConfigError, match=r"differs in \['seed', 'shots'\]"):
        icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", out, replace(settings, seed=1, shots=(0, 2)), resume=True,
                        progress=False)
    icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", out, replace(settings, batch_size=3), resume=True, progress=False)
    log = out / icl_run.PREDICTIONS_FILE
    log.write_text('{"shots": 0}\nnot json\n' + log.read_text())
    with pytest.raises(DataError, match="line 2 is not valid JSON"):  # only a torn *last* line is dropped
        icl_run.run_icl(ModelRef.parse("tiny:idefics3"), root / "shapes", out, settings, resume=True, progress=False)


def test_cli_refuses_bad_shots_and_policies_in_one_line(tmp_path, capsys):
    from robustvlm.cli import main

    for bad, says in ((["--shots", "0,x"], "--shots 0,x: expected comma-separated whole numbers"),
                      (["--demos", "random,nearest"], "unknown or missing demo policies ['nearest']")):
        argv = ["icl", "eval", "--model", "tiny:idefics3", "--data", str(tmp_path), "--out", str(tmp_path / "o"), *bad]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1
        assert not (tmp_path / "o").exists()
