"""Secrets (issue 17.5): a key is read from the environment only; a judge config that holds one
inline, in its URL, or instead of a variable's name is refused without echoing it; and a run with
a key in the environment writes it nowhere. Kinds of bad input covered: 5 (inline `api_key`,
inline `token`, `user:key@` in `base_url`, a key given as `api_key_env`, `--server` URL with
credentials)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_input import expect_clean_failure
from stub_judge_server import StubJudgeServer

from robustvlm.cli import main

SECRET = "sk-TOPSECRET-4242"


@pytest.fixture(scope="module")
def tasks_data(tmp_path_factory) -> Path:
    from robustvlm.data.synth import synthesize

    root = tmp_path_factory.mktemp("tasks")
    synthesize("tasks", root, seed=0, n_per_env=2)
    return root


def _judge_yaml(folder: Path, body: str) -> Path:
    path = folder / "judge.yaml"
    path.write_text(body, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        (f"base_url: http://127.0.0.1:9/v1\nmodel: j\napi_key: {SECRET}\n", ["api_key", "environment variable"]),
        (f"base_url: http://127.0.0.1:9/v1\nmodel: j\ntoken: {SECRET}\n", ["token"]),
        (f"base_url: http://bob:{SECRET}@127.0.0.1:9/v1\nmodel: j\n", ["base_url", "credentials"]),
        (f"base_url: http://127.0.0.1:9/v1\nmodel: j\napi_key_env: {SECRET}\n", ["api_key_env", "NAME"]),
    ],
    ids=["inline-api-key", "inline-token", "credentials-in-url", "key-as-variable-name"],
)
def test_a_secret_in_a_judge_config_is_refused_without_echoing_it(body, mentions, tasks_data, tmp_path, capsys):
    judge = _judge_yaml(tmp_path, body)
    line = expect_clean_failure(
        ["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(tmp_path / "ev"),
         "--metrics", "chrf,cee", "--judge", str(judge)],
        capsys, mentions=[str(judge), *mentions],
    )
    assert SECRET not in line
    assert not (tmp_path / "ev").exists()


def test_a_server_url_with_credentials_is_refused_without_echoing_it(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("")
    line = expect_clean_failure(
        ["rm", "sample", "--data", str(pairs), "--out", str(tmp_path / "s"),
         "--server", f"http://bob:{SECRET}@127.0.0.1:9/v1", "--server-model", "m"],
        capsys, mentions=["--server", "credentials"],
    )
    assert SECRET not in line


def test_a_key_in_the_environment_is_written_nowhere(tasks_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", SECRET)
    out = tmp_path / "ev"
    with StubJudgeServer() as stub:
        judge = _judge_yaml(tmp_path, f"base_url: {stub.url}\nmodel: j\napi_key_env: JUDGE_KEY\n")
        code = main(["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(out),
                     "--max-per-env", "1", "--max-new-tokens", "4", "--metrics", "chrf,cee",
                     "--judge", str(judge)])
    printed = "".join(capsys.readouterr())
    assert code == 0, printed
    assert stub.authorization and all(a == f"Bearer {SECRET}" for a in stub.authorization)  # it was used
    assert SECRET not in printed
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "metrics.json" for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), f"the key was written to {path}"
