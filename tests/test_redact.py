"""robustvlm.redact: which URLs and variable names are refused, what is masked, and what is not
(names a user writes every day must pass untouched)."""

from __future__ import annotations

import pytest

from robustvlm.redact import (
    check_url,
    check_variable_name,
    looks_like_token,
    redact,
    redact_settings,
    secret_name,
)


@pytest.mark.parametrize("url", ["http://localhost:8000/v1", "https://api.openai.com/v1", "http://[::1]:8000/v1",
                                 "http://127.0.0.1:9/v1/"])
def test_plain_api_roots_are_accepted(url):
    assert check_url(url) == url


@pytest.mark.parametrize(("url", "reason"), [
    ("http://bob:pw@h/v1", "credentials"),
    ("bob:pw@h:8000/v1", "credentials"),  # no scheme: still user-info
    ("http://h/v1?api_key=abc", "credentials"),
    ("http://h/v1?X-Api-Key=abc", "credentials"),
    ("http://h/v1?sig=abc", "credentials"),
    ("http://h/v1/hf_abcdefgh12345678", "credentials"),
    ("http://h/v1?version=2", "query string"),
    ("http://h/v1#top", "query string"),
    ("notaurl", "http:// or https://"),
    ("ftp://h/v1", "http:// or https://"),
    ("http:///v1", "http:// or https://"),
    ("http://h:port/v1", "port"),
])
def test_urls_that_are_refused_and_why_without_the_url(url, reason):
    with pytest.raises(ValueError, match=reason) as err:
        check_url(url)
    assert url not in str(err.value)


@pytest.mark.parametrize("text", ["sk-proj-Q7dK2mX9pL4vR8tW3nB6yH1cF5", "hf_PROBESECRET1234", "ghp_0123456789abcdefABCD",
                                  "AKIAIOSFODNN7EXAMPLE", "aZ3kQ9mX2pL7vR4tW8nB5yH1cF6dG0sJ",
                                  "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2Q"])
def test_keys_look_like_tokens(text):
    assert looks_like_token(text) and redact(f"x {text} y") == "x *** y"


@pytest.mark.parametrize("text", ["HF_TOKEN", "OPENAI_API_KEY", "HuggingFaceTB/SmolVLM-256M-Instruct",
                                  "Qwen2VLForConditionalGeneration", "task-signal", "sk-llava",
                                  "6f1c2d3e4b5a69788796a5b4c3d2e1f001234567",
                                  "/tmp/pytest-of-root/pytest-3/test_a_key_in_the_environment0/ev"])
def test_everyday_names_do_not(text):
    assert not looks_like_token(text) and redact(text) == text


def test_variable_names():
    assert check_variable_name("JUDGE_KEY") == "JUDGE_KEY"
    for bad in ("sk-123", "hf_PROBESECRET1234", "1ABC", "A B"):
        with pytest.raises(ValueError, match="NAME"):
            check_variable_name(bad)


def test_names_of_credentials_are_words_not_substrings():
    assert all(map(secret_name, ["api_key", "X-Api-Key", "apikey", "access_token", "password", "sig", "Authorization"]))
    assert not any(map(secret_name, ["max_tokens", "keep_checkpoints", "design", "per_run_keys", "author"]))


def test_redact_masks_urls_and_settings():
    assert redact("see http://u:p@h/v1?key=abc&x=1 now") == "see http://***@h/v1?key=***&x=1 now"
    settings = {"model": {"name": "org/vlm"}, "method_args": {"api_key": "plain words", "n": 2},
                "judge": {"api_key_env": "JUDGE_KEY", "max_tokens": 64}, "tags": ["hf_PROBESECRET1234"]}
    assert redact_settings(settings) == {"model": {"name": "org/vlm"}, "method_args": {"api_key": "***", "n": 2},
                                         "judge": {"api_key_env": "JUDGE_KEY", "max_tokens": 64}, "tags": ["***"]}
