"""Served models (issue 19.1): a server that is down, a wrong key, an image the server refuses,
replies that hold no answer, and wrong served-model options each give one clear error naming
what failed, no traceback. Kinds of bad input covered: 11."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from bad_input import expect_clean_failure
from stub_openai_server import StubOpenAIServer

FAST = ["--max-retries", "1", "--request-timeout", "5", "--no-cache"]


def _eval(data: Path, out: Path, *options: str) -> list[str]:
    return ["eval", "--model", "openai:m", "--data", str(data), "--out", str(out), *FAST, *options]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed after the block: connections are refused


def test_a_server_that_is_down(tasks_data, tmp_path, capsys):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    expect_clean_failure(_eval(tasks_data, tmp_path / "o", "--base-url", url), capsys,
                         mentions=["failed after 2 attempts", "refused", "--resume"])


@pytest.mark.parametrize(("fault", "mentions"), [
    ("401", ["HTTP 401", "record"]),  # a wrong key
    ("400", ["HTTP 400", "record"]),  # the server refuses the request (an image it cannot read)
    ("empty", ["no choices"]),
    ("malformed", ["malformed JSON", "after 2 attempts"]),
])
def test_a_server_that_answers_badly(fault, mentions, tasks_data, tmp_path, capsys):
    with StubOpenAIServer(fault_for=lambda body: fault) as server:
        expect_clean_failure(_eval(tasks_data, tmp_path / "o", "--base-url", server.url), capsys, mentions=mentions)


@pytest.mark.parametrize(("options", "mentions"), [
    ([], ["openai:m", "--base-url"]),
    (["--base-url", "http://u:pw@127.0.0.1:9/v1"], ["credentials"]),
    (["--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "sk-123"], ["NAME"]),
    (["--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "UNSET_SERVED_KEY_VAR"], ["UNSET_SERVED_KEY_VAR"]),
    (["--base-url", "http://127.0.0.1:9/v1", "--concurrency", "0"], ["--concurrency"]),
])
def test_bad_served_options(options, mentions, tasks_data, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("UNSET_SERVED_KEY_VAR", raising=False)
    error = expect_clean_failure(_eval(tasks_data, tmp_path / "o", *options), capsys, mentions=mentions)
    assert "pw" not in error and "sk-123" not in error
    assert not (tmp_path / "o" / "predictions.jsonl").exists()


def test_a_server_for_a_local_model(tasks_data, tmp_path, capsys):
    argv = ["eval", "--model", "tiny:idefics3", "--base-url", "http://127.0.0.1:9/v1", "--data", str(tasks_data),
            "--out", str(tmp_path / "o")]
    expect_clean_failure(argv, capsys, mentions=["--base-url", "served model"])
    assert not (tmp_path / "o").exists()
