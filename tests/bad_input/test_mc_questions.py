"""`mc eval` question files (issue 17.10): every question is checked when the benchmark is read,
before any model is loaded, and the error names the file and line. Kinds of bad input covered:
12 (duplicate options, options equal up to case and spaces, 30 options, an empty option, an
answer outside the options, a boolean answer, a non-string option, missing fields, unknown
fields, not JSON, not an object, bad base64)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input import expect_clean_failure

GOOD = {"id": "q", "image": "a.png", "question": "?", "options": ["a", "b"], "answer": 1,
        "source": "s", "dataset_class": "b", "prompt": "?", "rotation": 0}


def _row(**changes) -> str:
    return json.dumps({k: v for k, v in {**GOOD, **changes}.items() if v is not None})


CASES = {
    "duplicate-options": (_row(options=["cat", "dog", "cat"]), "options repeat ['cat']"),
    "duplicate-up-to-case": (_row(options=["Cat", "dog", "cat "]), "options repeat"),
    "thirty-options": (_row(options=[f"o{i}" for i in range(30)]), "30 options"),
    "empty-option": (_row(options=["a", " "]), "must not be empty"),
    "answer-out-of-range": (_row(answer=5), "answer 5 is not an index"),
    "boolean-answer": (_row(answer=True), "'answer' must be a int"),
    "non-string-option": (_row(options=["a", 3]), "at least 2 strings"),
    "missing-fields": ('{"id": "x"}', "missing fields"),
    "unknown-field": (_row(colour="red"), "unknown fields ['colour']"),
    "not-json": ("{not json", "not valid JSON"),
    "not-an-object": ('["a"]', "expected a JSON object"),
    "bad-base64": (_row(image=None, image_base64="***"), "not valid base64"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_questions_are_refused_when_the_benchmark_is_read(case, tmp_path: Path, capsys):
    line, message = CASES[case]
    bench = tmp_path / "q.jsonl"
    bench.write_text(_row() + "\n" + line + "\n", encoding="utf-8")
    expect_clean_failure(
        ["mc", "eval", "--model", "tiny:idefics3", "--benchmark", str(bench), "--out", str(tmp_path / "mc")],
        capsys, mentions=[f"{bench}:2:", message],
    )
