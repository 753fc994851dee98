"""CEE judge end to end against a stub OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import logging
import socket
from collections import Counter
from dataclasses import asdict

import pytest
from stub_judge_server import StubJudgeServer

from robustvlm.config import JudgeConfig
from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation.metrics.judge import (
    CACHE_FILE,
    CEEJudge,
    JudgeError,
    majority_vote,
)
from robustvlm.evaluation.metrics.judge_prompts import PROMPTS, parse_verdict

SECRET = "sk-test-7f3a9c-do-not-leak"
KEY_ENV = "ROBUSTVLM_TEST_JUDGE_KEY"
QUESTIONS = ["What colour is the bus?", "What does the sign say?", "How many cats?", "Who wrote it?"]
REFERENCES = ["red", "STOP", "3", "Ada Lovelace"]
PREDICTIONS = ["The bus is red.", "It says GO.", "There are 3 cats.", "Charles Babbage"]
EXPECTED = [1.0, 0.0, 1.0, 0.0]  # the stub's rule: reference contained in the prediction


def marker(k: int) -> str:
    """Text found only in prompt k's system message (to steer the stub per prompt)."""
    return PROMPTS[k].rules[:40]


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def config(server: StubJudgeServer, **overrides) -> JudgeConfig:
    fields = dict(base_url=server.url, model="stub-judge", api_key_env=KEY_ENV,
                  timeout_s=5, max_retries=4, backoff_s=0.001, max_concurrency=4)
    return JudgeConfig(**(fields | overrides))


def test_prompts_are_five_distinct_rule_sets():
    assert len(PROMPTS) == 5
    assert len({p.id for p in PROMPTS}) == 5 and len({p.rules for p in PROMPTS}) == 5
    assert len({marker(k) for k in range(5)}) == 5
    system, user = PROMPTS[0].messages("Q?", "ref", "pred")
    assert "VERDICT: 1" in system["content"] and "Q?" in user["content"]


@pytest.mark.parametrize(("reply", "verdict"), [
    ("VERDICT: 1", 1), ("verdict:0", 0), ("The answer matches.\nVERDICT: 1", 1),
    ("VERDICT: 0 ... on reflection VERDICT: 1", 1), ("**Verdict:** 0", 0), ("1", 1), ("`0`", 0),
    ("VERDICT: 10", None), ("VERDICT: yes", None), ("correct", None), ("", None),
])
def test_parse_verdict(reply, verdict):
    assert parse_verdict(reply) == verdict


def test_majority_vote_against_brute_force_over_all_vote_patterns():
    for pattern in itertools.product([0, 1, None], repeat=5):
        counts = Counter(pattern)
        result = majority_vote(dict(zip("abcde", pattern)))
        assert result["unparsed"] == counts[None]
        assert result["tie"] == (counts[0] == counts[1] >= 1)
        if counts[1] > counts[0]:
            assert result["score"] == 1.0
        elif counts[0] > counts[1]:
            assert result["score"] == 0.0
        else:
            assert result["score"] is None


def test_end_to_end_scores_and_sends_key(tmp_path):
    with StubJudgeServer() as server:
        result = CEEJudge(config(server), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
    assert [s["score"] for s in result.samples] == EXPECTED
    assert all(s["unparsed"] == 0 and not s["tie"] for s in result.samples)
    assert all(len(s["votes"]) == 5 for s in result.samples)
    assert result.summary == {"cee": 0.5, "n_samples": 4, "n_decided": 4, "n_ties": 0,
                              "n_no_verdict": 0, "n_unparsed": 0}
    assert server.requests == 4 * 5
    assert server.authorization == [f"Bearer {SECRET}"] * 20


def test_second_run_is_served_from_cache(tmp_path):
    with StubJudgeServer() as server:
        first = CEEJudge(config(server), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
        assert server.requests == 20
        second = CEEJudge(config(server), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
        assert server.requests == 20
        assert asdict(second) == asdict(first)
        CEEJudge(config(server, model="other-judge"), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
        assert server.requests == 40
        CEEJudge(config(server), tmp_path).score(QUESTIONS[:1], REFERENCES[:1], ["Blue."])
        assert server.requests == 45


def test_unreadable_cache_line_is_reported_and_skipped(tmp_path, caplog):
    with StubJudgeServer() as server:
        CEEJudge(config(server), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
        with (tmp_path / CACHE_FILE).open("a") as f:
            f.write('{"key": "trunc')
        with caplog.at_level(logging.WARNING):
            result = CEEJudge(config(server), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
    assert server.requests == 20
    assert [s["score"] for s in result.samples] == EXPECTED
    assert f"{CACHE_FILE}:21: unreadable cache line" in caplog.text


@pytest.mark.parametrize("status", [503, 429, 500])
def test_retries_transient_failures(tmp_path, status):
    with StubJudgeServer(fail_first=3, fail_status=status) as server:
        result = CEEJudge(config(server), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
    assert [s["score"] for s in result.samples] == EXPECTED
    assert server.requests == 20 + 3


def test_gives_up_after_max_retries_keeping_finished_verdicts(tmp_path):
    with StubJudgeServer(fail_first=3) as server:
        judge = CEEJudge(config(server, max_retries=2, max_concurrency=1), tmp_path)
        with pytest.raises(JudgeError, match="after 3 attempts: HTTP 503"):
            judge.score(QUESTIONS[:1], REFERENCES[:1], PREDICTIONS[:1])
        assert server.requests in (3, 4)  # a request already in flight may still finish
        judge.score(QUESTIONS[:1], REFERENCES[:1], PREDICTIONS[:1])
        assert server.requests == 3 + 5  # each verdict answered once: finished ones were kept


def test_non_retryable_status_fails_at_once(tmp_path, caplog):
    with StubJudgeServer(fail_first=100, fail_status=400) as server:
        judge = CEEJudge(config(server, max_concurrency=1), tmp_path)
        with caplog.at_level(logging.WARNING), pytest.raises(JudgeError, match="HTTP 400"):
            judge.score(QUESTIONS[:1], REFERENCES[:1], PREDICTIONS[:1])
    assert "retry" not in caplog.text
    sent = [json.dumps(b, sort_keys=True) for b in server.bodies]
    assert len(set(sent)) == len(sent) < 5  # no request twice; the ones queued behind are cancelled


def test_connection_errors_are_retried(tmp_path, caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connections are refused
    cfg = JudgeConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2,
                      backoff_s=0.001, max_concurrency=1, timeout_s=2)
    with caplog.at_level(logging.WARNING), pytest.raises(JudgeError, match="after 3 attempts"):
        CEEJudge(cfg, tmp_path).score(QUESTIONS[:1], REFERENCES[:1], PREDICTIONS[:1])
    assert "Connection refused" in caplog.text
    assert "retry 2/2" in caplog.text and "retry 3/" not in caplog.text


def test_key_never_appears_in_outputs_cache_or_logs(tmp_path, caplog, capsys):
    with caplog.at_level(logging.DEBUG), StubJudgeServer(fail_first=2) as server:
        result = CEEJudge(config(server), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
        with pytest.raises(JudgeError) as failure:
            bad = StubJudgeServer(fail_first=1, fail_status=401)
            with bad:
                CEEJudge(config(bad), tmp_path / "other").score(QUESTIONS, REFERENCES, PREDICTIONS)
    assert server.authorization[-1] == f"Bearer {SECRET}"
    assert "retry" in caplog.text
    written = [p.read_text() for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(SECRET not in text for text in written)
    captured = capsys.readouterr()
    for text in (json.dumps(asdict(result)), caplog.text, captured.out, captured.err,
                 str(failure.value), repr(config(server))):
        assert SECRET not in text


def test_missing_key_variable_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with StubJudgeServer() as server:
        with pytest.raises(ConfigError, match=KEY_ENV):
            CEEJudge(config(server), tmp_path).score(QUESTIONS, REFERENCES, PREDICTIONS)
    assert server.requests == 0


def test_ties_and_unparsed_verdicts_are_counted_not_scored(tmp_path):
    # Prompt 4 answers garbage, prompts 2 and 3 invert: 2 vs 2 with one unreadable.
    with StubJudgeServer(garbage_markers=(marker(4),), invert_markers=(marker(2), marker(3))) as server:
        result = CEEJudge(config(server), tmp_path / "tie").score(QUESTIONS, REFERENCES, PREDICTIONS)
    assert all(s["tie"] and s["score"] is None and s["unparsed"] == 1 for s in result.samples)
    assert all(s["votes"][PROMPTS[4].id] is None for s in result.samples)
    assert result.summary == {"cee": None, "n_samples": 4, "n_decided": 0, "n_ties": 4,
                              "n_no_verdict": 0, "n_unparsed": 4}

    # Prompt 4 garbage, prompt 3 inverted: 3 vs 1 decides for the stub's verdict.
    with StubJudgeServer(garbage_markers=(marker(4),), invert_markers=(marker(3),)) as server:
        result = CEEJudge(config(server), tmp_path / "majority").score(QUESTIONS, REFERENCES, PREDICTIONS)
    assert [s["score"] for s in result.samples] == EXPECTED
    assert result.summary["n_unparsed"] == 4 and result.summary["n_ties"] == 0

    # Every judge answers garbage: no verdict, neither tie nor wrong.
    with StubJudgeServer(garbage_markers=tuple(marker(k) for k in range(5))) as server:
        result = CEEJudge(config(server), tmp_path / "none").score(QUESTIONS, REFERENCES, PREDICTIONS)
    assert result.summary == {"cee": None, "n_samples": 4, "n_decided": 0, "n_ties": 0,
                              "n_no_verdict": 4, "n_unparsed": 20}


def test_mismatched_inputs_raise_data_error(tmp_path):
    judge = CEEJudge(JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m"), tmp_path)
    with pytest.raises(DataError, match="3 questions, 4 references, 4 predictions"):
        judge.score(QUESTIONS[:3], REFERENCES, PREDICTIONS)
    with pytest.raises(DataError, match=r"\[2\]|:2"):
        judge.score(QUESTIONS[:3], REFERENCES[:3], ["a", "b", None])
