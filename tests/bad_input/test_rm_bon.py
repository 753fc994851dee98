"""`rm bon` inputs (issue 17.7): score files are read-only and checked before anything is
written. Kinds of bad input covered: 9 (missing file, torn last line, a row without gold,
rewards with NaN, mixed K in one file, different prompts across files, different K across files,
a non-object row, an empty file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input import expect_clean_failure


def _rows(k: int = 3, ids=("p0", "p1")) -> list[dict]:
    return [{"id": i, "env": "e", "rewards": [float(j) for j in range(k)], "gold": [0.5] * k} for i in ids]


def _write(path: Path, rows: list, tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail, encoding="utf-8")
    return path


def _nan_row() -> list[dict]:
    rows = _rows()
    rows[1]["rewards"][0] = float("nan")
    return rows


def _mixed_k() -> list[dict]:
    return [*_rows(3, ["p0"]), *_rows(2, ["p1"])]


def _no_gold() -> list[dict]:
    rows = _rows()
    del rows[1]["gold"]
    return rows


CASES = {
    "missing-file": (None, None, ["scores file", "not found"]),
    "torn-last-line": (lambda p: _write(p, _rows(), '{"id": "p2", "rewa'), None, [".jsonl:3:", "not valid JSON"]),
    "no-gold": (lambda p: _write(p, _no_gold()), None, [".jsonl:2:", "'gold'"]),
    "nan-reward": (lambda p: _write(p, _nan_row()), None, [".jsonl:2:", "finite"]),
    "mixed-k": (lambda p: _write(p, _mixed_k()), None, [".jsonl:2:", "same K"]),
    "not-an-object": (lambda p: _write(p, [[1, 2]]), None, [".jsonl:1:", "not a JSON object"]),
    "empty-file": (lambda p: _write(p, []), None, ["no rows"]),
    "other-prompts": (lambda p: _write(p, _rows()), lambda p: _write(p, _rows(ids=("p0", "p9"))), ["different prompts"]),
    "other-k": (lambda p: _write(p, _rows()), lambda p: _write(p, _rows(k=4)), ["K = 4"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_scores_files_are_refused_and_never_rewritten(case, tmp_path, capsys):
    make_a, make_b, mentions = CASES[case]
    a = tmp_path / "a.jsonl"
    if make_a is not None:
        make_a(a)
    argv = ["rm", "bon", "--scores", f"A={a}", "--out", str(tmp_path / "bon")]
    if make_b is not None:
        b = make_b(tmp_path / "b.jsonl")
        argv[2:2] = ["--scores", f"B={b}"]
    inputs = {p: p.read_bytes() for p in tmp_path.glob("*.jsonl")}
    named = str(tmp_path / "b.jsonl") if case.startswith("other") else str(a)
    expect_clean_failure(argv, capsys, mentions=[named, *mentions])
    assert {p: p.read_bytes() for p in tmp_path.glob("*.jsonl")} == inputs  # inputs are read-only
    assert not (tmp_path / "bon" / "bon.json").exists()
