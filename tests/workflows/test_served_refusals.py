"""Servers that refuse or ignore what a command asks for, against the stub OpenAI-compatible
server: fields beyond the OpenAI API refused with HTTP 422 (as `transformers serve` does) or
prompt log-probabilities left out are found on the first request, with one error line (mc eval
--method loglik, a repetition penalty) or the semantic stage not measured (diagnose); the
decoding default is the same for local and served models and a setting is sent, never dropped;
usage.json counts every request sent, refused and killed runs included; a reply past
--max-reply-bytes fails its record without being read into memory (issues 30 and 29.19, 29.23)."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import pytest
import yaml
from kill_run import kill_when
from stub_openai_server import StubOpenAIServer

from robustvlm.cli import main
from robustvlm.config import ServedConfig
from robustvlm.models.endpoint import EndpointClient, EndpointError
from robustvlm.multiple_choice.build import MCQuestion, write_questions

FAST = ["--max-retries", "1", "--request-timeout", "5", "--no-cache"]
LOGLIK_FIELDS = ("prompt_logprobs", "add_generation_prompt", "continue_final_message")


@pytest.fixture
def bench(tmp_path) -> Path:
    from PIL import Image

    questions = []
    for i in range(5):
        image = tmp_path / f"img{i}.png"
        Image.new("RGB", (16, 16), (50 * i, 100, 200)).save(image)
        questions.append(MCQuestion(id=f"q{i}", image=str(image), question="", options=["a kitten", "an ox"],
                                    answer=1, source="test", dataset_class="x", prompt="What is in this photo?"))
    path = tmp_path / "bench.jsonl"
    write_questions(questions, path)
    return path


def _usage(folder: Path) -> dict:
    return json.loads((folder / "usage.json").read_text())


def _error_lines(err: str) -> list[str]:
    return [line for line in re.split(r"[\r\n]", err) if line.startswith("error:")]  # after a progress bar's \r


@pytest.mark.parametrize("server_kwargs", [{"refuse_fields": LOGLIK_FIELDS}, {"prompt_logprobs": False}],
                         ids=["refused-422", "ignored"])
def test_mc_loglik_on_a_server_without_prompt_logprobs_is_one_line_after_one_request(
        server_kwargs, bench, tmp_path, capsys):
    out = tmp_path / "ll"
    with StubOpenAIServer(**server_kwargs) as server:
        code = main(["mc", "eval", "--model", "openai:m", "--benchmark", str(bench), "--base-url", server.url,
                     "--out", str(out), *FAST])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    (line,) = _error_lines(err)
    assert err.count("--method generate") == 1 and "prompt log" in line
    assert "--resume" not in err, err
    assert server.requests == 1  # found on the first request, nothing more sent
    assert _usage(out / "openai_m")["requests"] == 1  # the refused request is counted


def test_diagnose_on_a_server_refusing_prompt_logprobs_completes_without_the_semantic_stage(
        domains_suite, tmp_path):
    classes = sorted(p.name for p in next((domains_suite / "shapes").iterdir()).iterdir() if p.is_dir())
    descriptions = tmp_path / "descriptions.yaml"
    descriptions.write_text(yaml.safe_dump({c: f"a drawing of a {c}" for c in classes}))
    out = tmp_path / "dg"
    with StubOpenAIServer(answer=lambda body: classes[0], refuse_fields=LOGLIK_FIELDS) as server:
        assert main(["diagnose", "--model", "openai:m", "--base-url", server.url, "--data",
                     str(domains_suite / "shapes"), "--out", str(out), "--shots", "1", "--n-per-env", "1",
                     "--descriptions", str(descriptions), *FAST]) == 0
    diagnosis = json.loads((out / "diagnosis.json").read_text())
    assert diagnosis["rows"] and all(r["semantic_acc"] is None and r["zero_shot_acc"] is not None
                                     for r in diagnosis["rows"])
    assert diagnosis["semantic_records"] == []
    asked = [b for b in server.bodies if "prompt_logprobs" in b]
    assert len(asked) == 1  # the semantic stage is tried once, then reported as not measured
    assert _usage(out)["requests"] == server.requests


def test_decoding_is_greedy_without_penalty_by_default_and_a_penalty_is_sent_not_dropped(tasks_data, tmp_path):
    base = ["eval", "--model", "openai:m", "--data", str(tasks_data), "--max-per-env", "1", "--max-new-tokens", "5",
            *FAST]
    with StubOpenAIServer() as server:
        assert main([*base, "--base-url", server.url, "--out", str(tmp_path / "default")]) == 0
        n = server.requests
        assert main([*base, "--base-url", server.url, "--out", str(tmp_path / "penalty"),
                     "--repetition-penalty", "1.15"]) == 0
    default, penalised = server.bodies[:n], server.bodies[n:]
    assert all("repetition_penalty" not in b and b["temperature"] == 0 and b["max_tokens"] == 5 for b in default)
    assert len(penalised) == n and all(b["repetition_penalty"] == 1.15 for b in penalised)
    assert "frequency_penalty" not in json.dumps(server.bodies)
    resolved = {name: yaml.safe_load((tmp_path / name / "config.resolved.yaml").read_text())
                for name in ("default", "penalty")}
    assert resolved["default"]["eval"]["repetition_penalty"] == 1.0
    assert resolved["penalty"]["eval"]["repetition_penalty"] == 1.15


def test_a_penalty_the_server_refuses_stops_the_run_with_one_line_after_one_request(
        tasks_data, domains_suite, tmp_path, capsys):
    out = tmp_path / "refused"
    with StubOpenAIServer(refuse_fields=("repetition_penalty",)) as server:
        assert main(["eval", "--model", "openai:m", "--base-url", server.url, "--data", str(tasks_data),
                     "--out", str(out), "--repetition-penalty", "1.15", "--max-new-tokens", "4", *FAST]) == 2
        assert server.requests == 1
        assert main(["icl", "eval", "--model", "openai:m", "--base-url", server.url, "--data",
                     str(domains_suite / "shapes"), "--out", str(tmp_path / "icl"), "--shots", "0",
                     "--n-per-env", "2", "--repetition-penalty", "1.2", *FAST]) == 2
        assert server.requests == 2
    err = capsys.readouterr().err
    lines = _error_lines(err)
    assert len(lines) == 2 and all("repetition_penalty" in line and "HTTP 422" in line for line in lines)
    assert "--repetition-penalty 1.15" in lines[0] and "--repetition-penalty 1.2" in lines[1]
    assert "Traceback" not in err and "--resume" not in err
    assert _usage(out)["requests"] == 1 and _usage(tmp_path / "icl")["requests"] == 1


def test_mc_decoding_options_apply_to_generation_only(bench, tmp_path, capsys):
    with StubOpenAIServer(answer=lambda body: "B") as server:
        assert main(["mc", "eval", "--model", "openai:m", "--benchmark", str(bench), "--base-url", server.url,
                     "--out", str(tmp_path / "gen"), "--method", "generate", "--repetition-penalty", "1.1",
                     "--max-new-tokens", "3", *FAST]) == 0
        assert {(b["repetition_penalty"], b["max_tokens"]) for b in server.bodies} == {(1.1, 3)}
        assert main(["mc", "eval", "--model", "openai:m", "--benchmark", str(bench), "--base-url", server.url,
                     "--out", str(tmp_path / "ll"), "--repetition-penalty", "1.1", *FAST]) == 2
    assert "apply to --method generate" in capsys.readouterr().err


def test_a_reply_past_the_size_limit_fails_unread(tmp_path):
    limit = 64 << 10
    with StubOpenAIServer(faults=["huge"], huge_bytes=8 << 20) as server:
        client = EndpointClient(ServedConfig(base_url=server.url, max_retries=3, max_reply_bytes=limit))
        tracemalloc.start()
        with pytest.raises(EndpointError, match=f"larger than {limit} bytes"):
            client.post("/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert server.requests == 1  # not retried: it would answer the same
    assert peak < 1 << 20  # at most the limit was read, not the 8 MiB reply


def test_a_huge_reply_fails_its_record_with_the_reason(tasks_data, tmp_path, capsys):
    with StubOpenAIServer(faults=[None, "huge"]) as server:
        assert main(["eval", "--model", "openai:m", "--base-url", server.url, "--data", str(tasks_data),
                     "--out", str(tmp_path / "huge"), "--max-reply-bytes", "65536", "--concurrency", "1",
                     *FAST]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "larger than 65536 bytes" in line and "max_tokens" in line and "record" in line


@pytest.mark.slow  # a child process (about 20 s on 2 cores)
def test_a_killed_run_leaves_the_requests_it_sent_in_usage_json(tasks_data, tmp_path):
    out = tmp_path / "killed"
    with StubOpenAIServer(latency_s=0.05) as server:
        kill_when(["eval", "--model", "openai:m", "--base-url", server.url, "--data", str(tasks_data),
                   "--out", str(out), "--batch-size", "2", "--concurrency", "1", *FAST],
                  lambda: server.requests >= 5)
        received = server.requests
    assert 5 <= received and received <= _usage(out)["requests"] <= received + 1  # one may be cut mid-send
