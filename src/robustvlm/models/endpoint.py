"""POST JSON to an OpenAI-compatible endpoint, with retries; chat messages with inlined images.

One client serves the CEE judge, `rm sample --server` and served models (`models.served`).
Written over urllib rather than the `openai` package: every caller needs only a JSON POST with
a bounded retry policy, a per-request timeout and a key read from the environment at call time,
and the package would add its own retries, timeouts and key handling on top of ours (and a
dependency); vLLM's extra fields (`prompt_logprobs`) go through as plain JSON.

Retried (exponential backoff from `backoff_s`, at least a numeric Retry-After): HTTP 429 and
5xx, timeouts and connection errors, and a 200 whose body is not JSON (a proxy cut it). Any
other status fails at once; its error keeps the status and the start of the server's reason
(`EndpointError.status`, `.detail`), so callers can tell a refused request field. The key is
never part of an error, a log line or a return value.

With an adaptive limit (`models.concurrency`, `--concurrency auto`) every attempt holds one of
its slots, and its outcome adjusts the limit: HTTP 429 and 503 and timeouts are overload, and an
overloaded attempt is retried as soon as a slot frees (after a Retry-After, if the server gave
one), the smaller limit being the back-off. Such retries do not count against `max_retries`: a
request refused again and again drives the limit down to 1, where the exponential back-off and
`max_retries` apply again.

A reply body is read up to `max_reply_bytes` (1 MiB by default): a server that ignores
`max_tokens` and streams megabytes fails that request at once, not retried (it would answer the
same), and no more than the limit is ever held in memory. `on_send` is called before every HTTP
attempt, retries included, so a caller can count what reached the server.
"""

from __future__ import annotations

import base64
import http.client
import io
import itertools
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from PIL import Image

from robustvlm.config import EndpointConfig
from robustvlm.errors import ConfigError, RobustVLMError
from robustvlm.models.concurrency import AdaptiveLimit
from robustvlm.redact import redacted_logger

logger = redacted_logger(__name__)

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
OVERLOAD_STATUS = frozenset({429, 503})


class EndpointError(RobustVLMError):
    """An endpoint request failed for good (after retries, or with a non-retryable status).

    Attributes:
        status: the HTTP status of a refused request (400, 422, ...), else None.
        detail: the start of the server's reason for refusing it ("" when none).
    """

    status: int | None = None
    detail: str = ""


class EndpointClient:
    """Sends JSON requests to one endpoint (`config.base_url`).

    Args:
        config: the endpoint and its request policy.
        who: how errors and log lines name the endpoint's user ("judge", "served model ...").
        error: the exception class raised on a request that failed for good.
        limit: the adaptive limit every attempt passes (None: the caller bounds concurrency).
        on_send: called before every HTTP attempt (retries included).
    """

    def __init__(self, config: EndpointConfig, *, who: str = "endpoint", error: type[EndpointError] = EndpointError,
                 limit: AdaptiveLimit | None = None, on_send: Callable[[], None] | None = None):
        self.config, self.who, self.error, self.limit, self.on_send = config, who, error, limit, on_send
        self.root = config.base_url.rstrip("/")

    def check_key(self) -> None:
        """ConfigError when the config names a key variable that is not set."""
        name = self.config.api_key_env
        if name is not None and not os.environ.get(name):
            raise ConfigError(f"{self.who} API key variable {name} is not set in the environment")

    def post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        """The decoded JSON reply to `body` POSTed at `base_url + route` (e.g. "/chat/completions")."""
        url = self.root + route
        data = json.dumps(body).encode("utf-8")
        retries = 0  # with back-off: bounded by max_retries
        for attempt in itertools.count(1):
            try:
                return self._attempt(url, data)
            except _Retryable as err:
                if self.limit is not None and err.overload and not self.limit.control.at_floor:
                    logger.debug("%s request refused (%s); the adaptive limit shrank: retry when a slot frees",
                                 self.who, err.reason)
                    time.sleep(err.retry_after)
                    continue
                if retries == self.config.max_retries:
                    raise self.error(
                        f"{self.who} request to {url} failed after {attempt} attempts: {err.reason}"
                    ) from None
                delay = max(self.config.backoff_s * 2**retries, err.retry_after)
                retries += 1
                logger.warning("%s request failed (%s); retry %d/%d in %.2fs", self.who, err.reason,
                               retries, self.config.max_retries, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _attempt(self, url: str, data: bytes) -> dict[str, Any]:
        """One POST, holding a slot of the adaptive limit (if any), which learns its outcome."""
        if self.limit is None:
            return self._post_once(url, data)
        with self.limit.slot() as attempt:
            try:
                reply = self._post_once(url, data)
            except _Retryable as err:
                attempt.overloaded = err.overload
                raise
            attempt.answered = True
            return reply

    def _post_once(self, url: str, data: bytes) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.config.api_key_env is not None:
            self.check_key()
            headers["Authorization"] = f"Bearer {os.environ[self.config.api_key_env]}"
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        limit = self.config.max_reply_bytes
        if self.on_send is not None:
            self.on_send()
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                payload = response.read(limit + 1)
        except urllib.error.HTTPError as err:
            if err.code in RETRY_STATUS:
                raise _Retryable(f"HTTP {err.code}", _retry_after(err.headers),
                                 overload=err.code in OVERLOAD_STATUS) from None
            detail = err.read(300).decode("utf-8", "replace")
            refused = self.error(f"{self.who} endpoint {url} answered HTTP {err.code}: {detail}")
            refused.status, refused.detail = err.code, detail
            raise refused from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            timed_out = isinstance(err, TimeoutError) or isinstance(getattr(err, "reason", None), TimeoutError)
            raise _Retryable(f"{type(err).__name__}: {getattr(err, 'reason', err)}", overload=timed_out) from None
        if len(payload) > limit:
            raise self.error(
                f"{self.who} endpoint {url}: the reply is larger than {limit} bytes (max_reply_bytes; "
                "--max-reply-bytes) and was not read further: the server may ignore max_tokens"
            )
        try:
            reply = json.loads(payload)
        except ValueError:
            raise _Retryable(f"malformed JSON reply: {payload[:120].decode('utf-8', 'replace')!r}") from None
        if not isinstance(reply, dict):
            raise _Retryable(f"reply is not a JSON object: {payload[:120].decode('utf-8', 'replace')!r}")
        return reply


class _Retryable(Exception):
    """A failed attempt worth retrying; `overload`: the server is overloaded (429, 503, timeout)."""

    def __init__(self, reason: str, retry_after: float = 0.0, *, overload: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.overload = overload


def _retry_after(headers: Any) -> float:
    """Seconds from a numeric Retry-After header (capped at 60), else 0."""
    try:
        return min(float(headers.get("Retry-After", 0)), 60.0)
    except (TypeError, ValueError):
        return 0.0


def image_data_url(image: Image.Image) -> str:
    """A PNG data URL of an image (lossless: the server sees the very pixels)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def openai_messages(messages: Sequence[dict], images: Sequence[Image.Image]) -> list[dict]:
    """Chat messages in the OpenAI wire format: each `{"type": "image"}` entry becomes an
    `image_url` part holding the next of `images` as a data URL; text parts pass as they are.
    Raises ConfigError when the image entries and `images` differ in number."""
    urls = iter([image_data_url(im) for im in images])
    out, used = [], 0
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(dict(message))
            continue
        parts = []
        for part in content:
            if part.get("type") == "image":
                url = next(urls, None)
                if url is None:
                    raise ConfigError(f"the prompt has more image entries than its {len(images)} images")
                parts.append({"type": "image_url", "image_url": {"url": url}})
                used += 1
            else:
                parts.append(dict(part))
        out.append({**message, "content": parts})
    if used != len(images):
        raise ConfigError(f"the prompt has {used} image entries for {len(images)} images")
    return out
