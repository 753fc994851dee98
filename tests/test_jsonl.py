"""Resumable JSONL: a torn last line is an interruption, any other bad line is damage."""

from __future__ import annotations

import json

import pytest

from robustvlm.errors import DataError
from robustvlm.jsonl import read_appended_rows


def test_missing_file_is_empty(tmp_path):
    assert read_appended_rows(tmp_path / "none.jsonl") == []


def test_torn_last_line_is_dropped_and_the_file_repaired(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a"}\n{"id": "é"}\n{"id": "c", "sco', encoding="utf-8")
    assert read_appended_rows(path) == [{"id": "a"}, {"id": "é"}]
    assert path.read_text(encoding="utf-8") == '{"id": "a"}\n{"id": "é"}\n'
    with path.open("a", encoding="utf-8") as f:  # appending continues on a clean line
        f.write(json.dumps({"id": "c"}) + "\n")
    assert [r["id"] for r in read_appended_rows(path)] == ["a", "é", "c"]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}', encoding="utf-8")
    assert read_appended_rows(path) == [{"id": "a"}, {"id": "b"}]
    assert path.read_text(encoding="utf-8").endswith('{"id": "b"}\n')


def test_bad_middle_line_names_file_and_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 2 is not valid JSON") as info:
        read_appended_rows(path)
    assert info.value.source == str(path) and info.value.record == 2
