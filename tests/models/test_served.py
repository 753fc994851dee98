"""Served models (`models.served`, `models.endpoint`, `models.response_cache`) against the stub
OpenAI-compatible server: the payload, retries and per-record errors, the response cache, option
log-likelihood from prompt log-probabilities, and the key."""

from __future__ import annotations

import base64
import io
import logging
import sqlite3

import numpy as np
import pytest
from PIL import Image
from stub_openai_server import StubOpenAIServer, prompt_tokens, word_logprob

from robustvlm.config import ServedConfig
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import ServedBackend, infer_family, load_backend
from robustvlm.models.chat import ChatPrompt
from robustvlm.models.endpoint import openai_messages
from robustvlm.models.response_cache import CACHE_FILE, ResponseCache, request_key
from robustvlm.models.served import LoglikUnavailable, ServedModel, ServedRequestError

KEY_ENV = "STUB_SERVED_KEY"
SECRET = "sk-served-SECRET-777"


def _config(server: StubOpenAIServer, **overrides) -> ServedConfig:
    settings = dict(base_url=server.url, backoff_s=0.001, max_retries=3, timeout_s=5.0, api_key_env=None)
    return ServedConfig(**{**settings, **overrides})


def _image(seed: int) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (12, 10, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def _prompts(n: int, images_each: int = 1) -> list[ChatPrompt]:
    return [
        ChatPrompt([{"role": "user", "content": [{"type": "image"}] * images_each
                     + [{"type": "text", "text": f"question {i}"}]}],
                   [_image(10 * i + j) for j in range(images_each)], record=f"r{i}")
        for i in range(n)
    ]


def _decoded(url: str) -> np.ndarray:
    header, data = url.split(",", 1)
    assert header == "data:image/png;base64"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))


def test_payload_shape_pixels_and_parameters():
    with StubOpenAIServer() as server:
        model = ServedModel(ModelRef.parse("openai:stub-vlm"), _config(server))
        replies = model.generate(_prompts(3, images_each=2), max_new_tokens=7)
    assert replies == [f"echo: question {i}" for i in range(3)]
    bodies = sorted(server.bodies, key=lambda b: b["messages"][0]["content"][-1]["text"])
    for i, body in enumerate(bodies):
        assert body["model"] == "stub-vlm" and body["temperature"] == 0.0 and body["max_tokens"] == 7
        (message,) = body["messages"]
        assert message["role"] == "user"
        kinds = [part["type"] for part in message["content"]]
        assert kinds == ["image_url", "image_url", "text"]
        for j, part in enumerate(message["content"][:2]):
            np.testing.assert_array_equal(_decoded(part["image_url"]["url"]), np.asarray(_image(10 * i + j)))


def test_image_entries_must_match_images():
    with pytest.raises(ConfigError, match="more image entries than its 1 images"):
        openai_messages([{"role": "user", "content": [{"type": "image"}, {"type": "image"}]}], [_image(0)])
    with pytest.raises(ConfigError, match="1 image entries for 2 images"):
        openai_messages([{"role": "user", "content": [{"type": "image"}]}], [_image(0), _image(1)])


@pytest.mark.parametrize("fault", ["429", "500", "503", "slow", "malformed"])
def test_transient_faults_are_retried(fault, caplog):
    with StubOpenAIServer(faults=[fault, fault], slow_s=1.0) as server:
        model = ServedModel(ModelRef.parse("openai:m"), _config(server, max_concurrency=1, timeout_s=0.5))
        with caplog.at_level(logging.WARNING):
            replies = model.generate(_prompts(3), max_new_tokens=4)
    assert replies == [f"echo: question {i}" for i in range(3)]
    assert server.requests == 3 + 2
    assert "retry 2/3" in caplog.text


@pytest.mark.parametrize(("fault", "why"), [("empty", "no choices"), ("400", "HTTP 400"), ("401", "HTTP 401")])
def test_a_failed_record_is_named_and_answered_ones_are_kept(fault, why):
    def failing(body):
        return fault if "question 2" in str(body["messages"]) else None

    with StubOpenAIServer(fault_for=failing) as server:
        model = ServedModel(ModelRef.parse("openai:m"), _config(server, max_concurrency=1))
        with pytest.raises(ServedRequestError, match=rf"1 of 4 requests failed.*record 'r2': .*{why}") as failure:
            model.generate(_prompts(4), max_new_tokens=4)
        assert set(failure.value.failures) == {"r2"}
        assert "rerun with --resume" in str(failure.value)
        sent = server.requests
        # The answered requests are in the cache: asking again sends only what was not answered.
        with pytest.raises(ServedRequestError):
            model.generate(_prompts(4), max_new_tokens=4)
        answered = {b["messages"][0]["content"][-1]["text"] for b in server.bodies[:sent]} - {"question 2"}
        resent = [b["messages"][0]["content"][-1]["text"] for b in server.bodies[sent:]]
        assert "question 2" in resent and not set(resent) & answered


def test_cache_sends_nothing_twice_and_no_cache_sends_everything(response_cache_folder):
    with StubOpenAIServer() as server:
        first = ServedModel(ModelRef.parse("openai:m"), _config(server)).generate(_prompts(5), max_new_tokens=4)
        assert server.requests == 5
        again = ServedModel(ModelRef.parse("openai:m"), _config(server))
        assert again.generate(_prompts(5), max_new_tokens=4) == first
        assert server.requests == 5 and again.usage["cache_hits"] == 5 and again.usage["requests"] == 0
        other_length = ServedModel(ModelRef.parse("openai:m"), _config(server)).generate(_prompts(5), max_new_tokens=5)
        assert server.requests == 10 and other_length == first  # a parameter is part of the key
        uncached = ServedModel(ModelRef.parse("openai:m"), _config(server, cache=False))
        uncached.generate(_prompts(5), max_new_tokens=4)
        assert server.requests == 15 and uncached.usage["requests"] == 5
    assert (response_cache_folder / CACHE_FILE).is_file()


def test_cache_key_is_route_and_body_and_holds_no_header(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    cache = ResponseCache(tmp_path)
    with StubOpenAIServer() as server:
        model = ServedModel(ModelRef.parse("openai:m"), _config(server, api_key_env=KEY_ENV), cache=cache)
        model.generate(_prompts(2), max_new_tokens=3)
        assert server.authorization == [f"Bearer {SECRET}"] * 2
    body = server.bodies[0]
    assert cache.get(request_key("/chat/completions", body))["choices"][0]["message"]["content"].startswith("echo")
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        dump = "\n".join(db.iterdump())
    assert SECRET not in dump and KEY_ENV not in dump


def test_usage_counts_tokens_of_sent_requests():
    with StubOpenAIServer() as server:
        model = ServedModel(ModelRef.parse("openai:m"), _config(server))
        model.generate(_prompts(3), max_new_tokens=4)
    expected = sum(len(prompt_tokens(b)) for b in server.bodies)
    assert dict(model.usage) == {"cache_hits": 0, "requests": 3, "prompt_tokens": expected, "completion_tokens": 9}


def test_option_logliks_from_prompt_logprobs_match_brute_force():
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "which one?"}]}]
    options = ["A. a cat", "B. an elephant", "C. ox"]
    with StubOpenAIServer() as server:
        scores = ServedModel(ModelRef.parse("openai:m"), _config(server)).option_logliks(messages, options, images=[_image(1)])
    for text, total, count in zip(options, scores.sum, scores.n_tokens):
        words = text.split()
        assert count == len(words)
        assert total == pytest.approx(sum(word_logprob(w) for w in words))
    assert scores.prediction(normalize=False) == 2  # the shortest words
    continued = [b for b in server.bodies if b.get("continue_final_message")]
    assert len(continued) == 3 and all(b["add_generation_prompt"] is False for b in continued)
    assert all(b["prompt_logprobs"] == 0 and b["max_tokens"] == 1 for b in server.bodies)


def test_a_server_without_prompt_logprobs_says_to_generate():
    with StubOpenAIServer(prompt_logprobs=False) as server:
        model = ServedModel(ModelRef.parse("openai:m"), _config(server))
        with pytest.raises(LoglikUnavailable, match="--method generate"):
            model.option_logliks([{"role": "user", "content": "q"}], ["a", "b"])


def test_backend_registry_and_errors(monkeypatch):
    assert infer_family(ModelRef.parse("openai:gpt-4o")) == "openai"
    with pytest.raises(ConfigError, match="--base-url"):
        load_backend(ModelRef.parse("openai:gpt-4o"))
    with StubOpenAIServer() as server:
        backend = load_backend(ModelRef.parse("openai:m"), served=_config(server))
        assert isinstance(backend, ServedBackend) and backend.supports("generate", "option_loglik")
        assert not backend.supports("image_embed") and backend.usage is not None
        assert backend.generate_chats(_prompts(1), max_new_tokens=2, repetition_penalty=1.15) == ["echo: question 0"]
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"{KEY_ENV} is not set"):
        ServedModel(ModelRef.parse("openai:m"), ServedConfig(base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV))
    with pytest.raises(ConfigError, match="openai:MODEL"):
        ServedModel(ModelRef.parse("openai:"), ServedConfig(base_url="http://127.0.0.1:9/v1"))


def test_a_server_that_is_down_is_one_clear_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed after the block: connections are refused
    model = ServedModel(ModelRef.parse("openai:m"), ServedConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1,
                                                 backoff_s=0.001, max_concurrency=2))
    with pytest.raises(ServedRequestError, match=r"failed after 2 attempts: URLError.*refused") as failure:
        model.generate(_prompts(6), max_new_tokens=2)
    assert "more not sent" in str(failure.value)  # no new request starts after a failure
