"""OpenAI-compatible endpoints: the CEE judge and served models."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from robustvlm.config.base import _Section
from robustvlm.redact import check_url, check_variable_name, secret_name

MAX_REPLY_BYTES = 1 << 20  # 1 MiB: far above any reply at the max_tokens this project asks for
SECRET_FIELDS = {"base_url", "api_key_env"}  # values never echoed in errors


class EndpointConfig(_Section):
    """An OpenAI-compatible endpoint and how to send requests to it (shared by the CEE judge,
    `rm sample --server` and served models): the key only through an environment variable; the
    URL and the variable's name as `robustvlm.redact` allows."""

    base_url: str = Field(description="OpenAI-compatible API root, e.g. http://localhost:8000/v1")
    api_key_env: str | None = Field(default=None, description="NAME of the env variable holding the key")
    timeout_s: float = Field(default=60.0, gt=0.0, description="seconds per HTTP request")
    max_concurrency: int = Field(default=8, ge=1, description="requests in flight at once")
    max_retries: int = Field(default=5, ge=0, description="retries after the first attempt")
    backoff_s: float = Field(default=1.0, ge=0.0, description="first retry delay; doubles each retry")
    max_reply_bytes: int = Field(
        default=MAX_REPLY_BYTES, ge=1024,
        description="largest reply body read (bytes); a larger reply fails its request, unread past the limit",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secret(cls, raw: Any) -> Any:
        names = raw if isinstance(raw, dict) else {}
        inline = sorted(str(k) for k in names if str(k) != "api_key_env" and secret_name(str(k)))
        if inline:
            raise ValueError(
                f"{inline[0]}: a key written in a config would be copied into every run folder; put "
                "it in an environment variable and give that variable's NAME as api_key_env"
            )
        return raw

    @field_validator("base_url")
    @classmethod
    def _usable_url(cls, url: str) -> str:
        return check_url(url)

    @field_validator("api_key_env")
    @classmethod
    def _a_variable_name(cls, name: str | None) -> str | None:
        return None if name is None else check_variable_name(name)


class JudgeConfig(EndpointConfig):
    """Where and how to ask the CEE judge model (`eval.judge`): an OpenAI-compatible endpoint."""

    model: str = Field(
        description="model name sent in each request, e.g. Qwen/Qwen2.5-32B-Instruct"
    )
    temperature: float = Field(default=0.0, ge=0.0)
    max_tokens: int = Field(default=64, gt=0, description="reply length limit per verdict")


class ServedConfig(EndpointConfig):
    """A model behind an OpenAI-compatible server (`--model openai:MODEL --base-url URL`):
    greedy (temperature 0) chat completions, answers kept in the response cache unless `cache`
    is false (`models.response_cache`)."""

    cache: bool = Field(default=True, description="reuse answers from the response cache (ROBUSTVLM_CACHE)")
    adaptive_concurrency: bool = Field(
        default=False, description="learn the requests in flight, from 8 up to max_concurrency, from the replies "
        "(AIMD: models.concurrency) instead of keeping max_concurrency in flight")
