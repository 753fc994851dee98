"""`--model openai:MODEL --base-url URL` on every command that takes a served model (eval, mc
eval, icl eval, diagnose) against the stub OpenAI-compatible server: the same files as a local
model, nothing re-sent after a kill or into a new folder, one clear error per failure, and the
key nowhere."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from kill_run import kill_when
from stub_openai_server import StubOpenAIServer, last_user_text

from robustvlm.cli import main
from robustvlm.data.wordnet import wordnet_available
from robustvlm.multiple_choice.build import MCQuestion, write_questions

KEY_ENV = "STUB_SERVED_KEY"
SECRET = "sk-served-SECRET-9191"
FAST = ["--max-retries", "1", "--request-timeout", "5"]


@pytest.fixture(scope="module")
def tasks_data(built_in_data) -> Path:
    """The built-in `tasks` data with 3 records per environment (the shared one has 2)."""
    return built_in_data("tasks", 3) / "data.jsonl"


def _eval(data: Path, out: Path, server: StubOpenAIServer, *extra: str) -> int:
    return main(["eval", "--model", "openai:stub-vlm", "--base-url", server.url, "--data", str(data),
                 "--out", str(out), "--batch-size", "2", "--max-new-tokens", "6", *FAST, *extra])


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _files_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_eval_writes_what_a_local_model_writes_and_resends_nothing(tasks_data, tmp_path):
    with StubOpenAIServer() as server:
        assert _eval(tasks_data, tmp_path / "served", server) == 0
        n = server.requests
        assert _eval(tasks_data, tmp_path / "again", server) == 0  # a new folder: all from the cache
        assert server.requests == n
    assert main(["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(tmp_path / "local"),
                 "--max-new-tokens", "2", "--max-per-env", "1"]) == 0
    served, local = _rows(tmp_path / "served" / "predictions.jsonl"), _rows(tmp_path / "local" / "predictions.jsonl")
    assert len(served) == n and set(served[0]) == set(local[0])
    assert all(r["prediction"] == "echo: " + r["instruction"] for r in served)
    metrics = json.loads((tmp_path / "served" / "metrics.json").read_text())
    assert set(metrics) == set(json.loads((tmp_path / "local" / "metrics.json").read_text()))
    assert json.loads((tmp_path / "served" / "usage.json").read_text())["requests"] == n
    assert json.loads((tmp_path / "again" / "usage.json").read_text()) == {
        "cache_hits": n, "requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
    resolved = (tmp_path / "served" / "config.resolved.yaml").read_text()
    assert "openai:stub-vlm" in resolved and server.url in resolved


def test_a_failed_record_stops_the_run_and_resume_sends_only_the_rest(tasks_data, tmp_path, capsys):
    out = tmp_path / "run"
    instructions = [json.loads(line)["instruction"] for line in tasks_data.read_text().splitlines()
                    if json.loads(line).get("split", "train") == "test"]
    broken = instructions[len(instructions) // 2]

    def fault(body):
        return "empty" if last_user_text(body) == broken else None

    with StubOpenAIServer(fault_for=fault) as server:
        assert _eval(tasks_data, out, server, "--concurrency", "1") == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "no choices" in err and "--resume" in err and "Traceback" not in err
    kept = _rows(out / "predictions.jsonl")
    assert 0 < len(kept) < len(instructions)
    answered = [json.dumps(b["messages"]) for b in server.bodies if last_user_text(b) != broken]
    with StubOpenAIServer() as healed:
        assert _eval(tasks_data, out, healed, "--resume") == 0
    resent = {json.dumps(b["messages"]) for b in healed.bodies}
    assert broken in {last_user_text(b) for b in healed.bodies} and not resent & set(answered)
    rows = _rows(out / "predictions.jsonl")
    assert sorted(r["id"] for r in rows) == sorted({r["id"] for r in rows}) and len(rows) == len(instructions)
    usage = json.loads((out / "usage.json").read_text())
    assert usage["requests"] == server.requests + healed.requests  # both runs add up, the failed request too


def test_a_killed_eval_resumes_without_resending_answered_requests(tasks_data, tmp_path):
    out = tmp_path / "killed"
    predictions = out / "predictions.jsonl"
    with StubOpenAIServer(latency_s=0.05) as server:
        argv = ["eval", "--model", "openai:stub-vlm", "--base-url", server.url, "--data", str(tasks_data),
                "--out", str(out), "--batch-size", "2", "--concurrency", "1", *FAST]
        kill_when(argv, lambda: predictions.is_file() and len(predictions.read_text().splitlines()) >= 4)
        before = server.requests
        kept = len(predictions.read_text().splitlines())
        assert main([*argv, "--resume"]) == 0
    n = len(_rows(predictions))
    assert 4 <= kept < n and server.requests - before < n - kept + 2  # at most a batch in flight was lost
    sent = [json.dumps(b["messages"]) for b in server.bodies]
    assert len(sent) - len(set(sent)) <= 1  # nothing answered was sent again (one request may have been cut)
    assert sorted(r["id"] for r in _rows(predictions)) == sorted({r["id"] for r in _rows(predictions)})


def test_the_key_is_sent_but_never_written_or_printed(tasks_data, tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with StubOpenAIServer(faults=["500"]) as server:
        assert _eval(tasks_data, tmp_path / "ok", server, "--api-key-env", KEY_ENV) == 0
    with StubOpenAIServer(faults=["401"] * 50) as refusing:
        assert _eval(tasks_data, tmp_path / "refused", refusing, "--api-key-env", KEY_ENV, "--no-cache") == 2
    assert set(server.authorization) == {f"Bearer {SECRET}"}
    captured = capsys.readouterr()
    assert "HTTP 401" in captured.err
    for text in (_files_text(tmp_path), captured.out, captured.err, caplog.text):
        assert SECRET not in text


@pytest.fixture
def bench(tmp_path) -> Path:
    from PIL import Image

    questions = []
    for i in range(4):
        image = tmp_path / f"img{i}.png"
        Image.new("RGB", (16, 16), (60 * i, 100, 200)).save(image)
        questions.append(MCQuestion(id=f"q{i}", image=str(image), question="", options=["a kitten", "an ox", "elephant"],
                                    answer=1, source="test", dataset_class="x", prompt="What is in this photo?"))
    path = tmp_path / "bench.jsonl"
    write_questions(questions, path, embed_images=True)
    return path


def _results(out: Path) -> list[dict]:
    with (out / "results.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_mc_eval_generate_and_loglik_over_a_server(bench, tmp_path, capsys):
    base = ["mc", "eval", "--model", "openai:m", "--benchmark", str(bench), *FAST]
    with StubOpenAIServer(answer=lambda body: "B") as server:
        assert main([*base, "--base-url", server.url, "--out", str(tmp_path / "gen"), "--method", "generate"]) == 0
        assert main([*base, "--base-url", server.url, "--out", str(tmp_path / "ll"), "--sum"]) == 0
    (gen,) = _results(tmp_path / "gen")
    assert gen["method"] == "generate" and float(gen["accuracy"]) == 1.0 and gen["family"] == "openai"
    (ll,) = _results(tmp_path / "ll")
    # the stub's log-probability falls with word length: "B. an ox" (the answer) has the highest sum
    assert ll["method"] == "loglik" and float(ll["accuracy"]) == 1.0
    assert json.loads((tmp_path / "ll" / "openai_m" / "usage.json").read_text())["requests"] == 4 * 4
    with StubOpenAIServer(prompt_logprobs=False) as plain:
        assert main([*base, "--base-url", plain.url, "--out", str(tmp_path / "no_ll"), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "prompt log-probabilities" in err and "--method generate" in err and "Traceback" not in err


def test_icl_eval_sends_the_demos_images_in_one_request(domains_suite, tmp_path):
    with StubOpenAIServer(answer=lambda body: "circle") as server:
        assert main(["icl", "eval", "--model", "openai:m", "--base-url", server.url, "--data",
                     str(domains_suite / "shapes"), "--out", str(tmp_path / "icl"), "--shots", "0,2",
                     "--demos", "random", "--n-per-env", "1", *FAST]) == 0
    images = sorted({sum(p["type"] == "image_url" for m in b["messages"] if isinstance(m["content"], list)
                         for p in m["content"]) for b in server.bodies})
    assert images == [1, 3]
    roles = [m["role"] for m in next(b for b in server.bodies if len(b["messages"]) > 1)["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    results = json.loads((tmp_path / "icl" / "icl_results.json").read_text())
    assert {r["policy"] for r in results["rows"]} == {"zero-shot", "random"}


@pytest.mark.skipif(not wordnet_available(), reason="WordNet (wordnet-base) not installed")
def test_diagnose_measures_what_a_served_model_allows(domains_suite, tmp_path):
    with StubOpenAIServer(answer=lambda body: "circle") as server:
        assert main(["diagnose", "--model", "openai:m", "--base-url", server.url, "--data",
                     str(domains_suite / "shapes"), "--out", str(tmp_path / "dg"), "--shots", "1",
                     "--n-per-env", "1", *FAST]) == 0
    rows = json.loads((tmp_path / "dg" / "diagnosis.json").read_text())["rows"]
    for row in rows:
        assert row["probe_acc"] is None and row["probe_skill"] is None  # no vision tower to probe
        assert 0 <= row["semantic_acc"] <= 1 and row["zero_shot_acc"] is not None
    assert "visual" not in {g for r in rows for g in r["gaps"]}
