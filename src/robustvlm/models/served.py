"""A model behind an OpenAI-compatible server (vLLM, SGLang, an API): greedy replies and, where
the server returns prompt log-probabilities, option log-likelihoods.

`--model openai:MODEL --base-url URL` selects it (`models.backends`, family "openai"). Every
request is a chat completion at temperature 0; images go as PNG data URLs
(`models.endpoint.openai_messages`). Requests of one call run `max_concurrency` at a time (with
`adaptive_concurrency`, as many as `models.concurrency` learns, up to `max_concurrency`; the
limit learnt carries over from call to call) and retry as `models.endpoint` says; a reply is
put in the response cache (`models.response_cache`) as soon as it arrives, and a request whose reply is cached is never sent again. When requests
fail for good, no new request starts, those in flight finish (and are cached), and one
`ServedRequestError` names each failed record and why.

Option log-likelihood uses vLLM's `prompt_logprobs` extension of chat completions: the prompt
up to the assistant turn is sent once, then the prompt with each continuation as the start of
the assistant's reply (`continue_final_message`); a continuation's score is the sum of the
log-probabilities of the prompt tokens past the bare prompt's length.

Fields beyond the OpenAI API (vLLM's `prompt_logprobs`, `add_generation_prompt`,
`continue_final_message`, `repetition_penalty`) are sent only when a call needs them. The first
request of each kind (the set of such fields it carries) goes alone, before any other: a server
that refuses one of its fields (HTTP 400/422 naming it) or, asked for prompt log-probabilities,
answers without them is found on that one request, and the call stops with one ConfigError
line (`LoglikUnavailable` for log-likelihood, `UnsupportedSetting` for a decoding setting the
server cannot apply), never a setting silently dropped.

Usage (HTTP requests sent, retries and refused ones included; cache hits; prompt and completion
tokens) adds up in `usage`; `track_usage` rewrites a run folder's usage.json at every change, so
a killed or refused run leaves its counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from tqdm.auto import tqdm

from robustvlm.config import ServedConfig
from robustvlm.errors import ConfigError
from robustvlm.model_ref import PREFIXES, SERVED, ModelRef
from robustvlm.models.chat import ChatPrompt
from robustvlm.models.concurrency import AIMD, AdaptiveLimit
from robustvlm.models.endpoint import EndpointClient, EndpointError, openai_messages
from robustvlm.models.loglik import OptionScores
from robustvlm.models.response_cache import ResponseCache, request_key
from robustvlm.redact import refuse_key_like

SERVED_PREFIX = PREFIXES[SERVED]
CHAT_ROUTE = "/chat/completions"
MAX_LISTED_FAILURES = 5
USAGE_KEYS = ("requests", "cache_hits", "prompt_tokens", "completion_tokens")
LOGLIK_FIELDS = ("prompt_logprobs", "add_generation_prompt", "continue_final_message")
DECODING_FIELDS = ("repetition_penalty",)
REFUSAL_STATUS = (400, 422)
LOGLIK_HINT = "this server cannot score options by log-likelihood (in `mc eval`, use --method generate)"


class ServedRequestError(EndpointError):
    """Some requests of a call failed for good; `failures` maps each failed record to why."""

    def __init__(self, model: ModelRef, failures: dict[str, str], n_requests: int, n_unsent: int):
        self.failures, self.n_requests, self.n_unsent = failures, n_requests, n_unsent
        listed = "; ".join(f"record {rec!r}: {why}" for rec, why in list(failures.items())[:MAX_LISTED_FAILURES])
        more = len(failures) - MAX_LISTED_FAILURES
        super().__init__(
            f"served model '{model.name}': {len(failures)} of {n_requests} requests failed"
            + (f" ({n_unsent} more not sent)" if n_unsent else "")
            + f": {listed}" + (f"; and {more} more" if more > 0 else "")
            + ". Finished records are kept and answered requests are cached: rerun with --resume"
        )


class LoglikUnavailable(ConfigError):
    """The server refuses or ignores prompt log-probabilities: option log-likelihood is not possible."""


class UnsupportedSetting(ConfigError):
    """The server refuses a decoding setting a command asked for (e.g. `repetition_penalty`)."""


class _ReplyProblem(Exception):
    """A reply that arrived but holds no usable answer (not retried)."""


class ServedModel:
    """Requests to one served model.

    Args:
        ref: "openai:MODEL" (MODEL is what requests name).
        config: the endpoint and request policy; `config.cache` false sends every request.
        cache: the response cache to use (default: the user cache folder's).
    """

    def __init__(self, ref: ModelRef, config: ServedConfig, cache: ResponseCache | None = None):
        if ref.kind != SERVED or not ref.location:
            raise ConfigError(f"a served model is named {SERVED_PREFIX}MODEL, got {ref.name!r}")
        refuse_key_like(ref.location, "served model name", "the model id the server lists")
        self.ref, self.name, self.model_id, self.config = ref, ref.name, ref.location, config
        limit = AdaptiveLimit(AIMD(config.max_concurrency)) if config.adaptive_concurrency else None
        self.client = EndpointClient(config, who=f"served model '{ref.name}'", limit=limit,
                                     on_send=lambda: self._count(requests=1))
        self.client.check_key()
        self.cache = (cache or ResponseCache()) if config.cache else None
        self.usage: Counter[str] = Counter(dict.fromkeys(USAGE_KEYS, 0))
        self._usage_lock = threading.Lock()
        self._usage_sink: Callable[[Mapping[str, int]], None] | None = None
        self._accepted: set[frozenset[str]] = set()  # kinds of request (extra fields) a reply came to

    def track_usage(self, sink: Callable[[Mapping[str, int]], None]) -> None:
        """Call `sink(usage)` now and at every change of the counts (under the counting lock)."""
        with self._usage_lock:
            self._usage_sink = sink
            sink(dict(self.usage))

    # --- requests -------------------------------------------------------------------------

    def request_all(
        self, bodies: Sequence[dict], records: Sequence[str], *, desc: str | None = None,
        check: Callable[[dict], object] | None = None,
    ) -> list[dict]:
        """The replies to `bodies` (POSTed at /chat/completions), in order; cached ones are not
        sent; the first of a kind not yet answered goes alone, the rest `max_concurrency` at a
        time. `check(reply)` vets each new reply before it is cached (raising ConfigError stops
        the call). Raises ServedRequestError, or the ConfigError of a refused field (module doc)."""
        keys = [request_key(CHAT_ROUTE, b) for b in bodies]
        replies: list[dict | None] = [self.cache.get(key) if self.cache is not None else None for key in keys]
        todo = [i for i, reply in enumerate(replies) if reply is None]
        self._count(cache_hits=len(bodies) - len(todo))
        failures: dict[str, str] = {}
        if todo and _kind(bodies[todo[0]]) not in self._accepted:
            first = todo.pop(0)
            try:
                replies[first] = self._send(bodies[first], keys[first], check)
            except (EndpointError, _ReplyProblem) as err:
                failures[records[first]] = str(err)
        if todo and not failures:
            sent, failed = self._send_concurrently(todo, bodies, keys, check, desc)
            for i, reply in sent.items():
                replies[i] = reply
            failures.update({records[i]: message for i, message in failed.items()})
        if failures:
            unsent = sum(r is None for r in replies) - len(failures)
            raise ServedRequestError(self.ref, failures, len(bodies), unsent)
        return replies  # type: ignore[return-value]  # every entry is filled when nothing failed

    def _send_concurrently(
        self, todo: Sequence[int], bodies: Sequence[dict], keys: Sequence[str],
        check: Callable[[dict], object] | None, desc: str | None,
    ) -> tuple[dict[int, dict], dict[int, str]]:
        """Send `bodies[i]` for each i in `todo`, `max_concurrency` at a time: the replies and the
        failures' messages by index. The first failure cancels the requests not yet started; a
        ConfigError (a refused field, a failed `check`) cancels them and is raised."""
        sent: dict[int, dict] = {}
        failed: dict[int, str] = {}
        with ThreadPoolExecutor(max_workers=self.config.max_concurrency) as pool:
            futures = {pool.submit(self._send, bodies[i], keys[i], check): i for i in todo}
            bar = tqdm(as_completed(futures), total=len(futures), desc=desc, disable=desc is None, leave=False)
            for future in bar:
                if future.cancelled():
                    continue
                try:
                    sent[futures[future]] = future.result()
                except (EndpointError, _ReplyProblem) as err:
                    failed[futures[future]] = str(err)
                    _cancel_all(futures)
                except ConfigError:
                    _cancel_all(futures)
                    raise
        return sent, failed

    def _send(self, body: dict, key: str, check: Callable[[dict], object] | None = None) -> dict:
        try:
            reply = self.client.post(CHAT_ROUTE, body)
        except EndpointError as err:
            raise self._refusal(err, body) or err from None
        choices = reply.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _ReplyProblem(f"the reply holds no choices: {str(reply)[:160]}")
        usage = reply.get("usage") or {}
        self._count(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=int(usage.get("completion_tokens") or 0))
        if check is not None:
            check(reply)
        self._accepted.add(_kind(body))
        if self.cache is not None:
            self.cache.put(key, reply)
        return reply

    def _refusal(self, err: EndpointError, body: dict) -> ConfigError | None:
        """The one-line error of a request refused for an extra field it carries, else None."""
        named = [f for f in _kind(body) if f in err.detail] if err.status in REFUSAL_STATUS else []
        if not named:
            return None
        said = f"HTTP {err.status}: {err.detail.strip()[:160]}"
        if named[0] in LOGLIK_FIELDS:
            return LoglikUnavailable(
                f"served model '{self.name}': the server refuses the request fields that ask for prompt "
                f"log-probabilities ({said}); {LOGLIK_HINT}"
            )
        return UnsupportedSetting(
            f"served model '{self.name}': the server refuses `{named[0]}` ({said}), so it cannot apply "
            f"--{named[0].replace('_', '-')} {body[named[0]]}: leave that option at its default for this server"
        )

    def _count(self, **amounts: int) -> None:
        with self._usage_lock:
            self.usage.update(amounts)
            if self._usage_sink is not None:
                self._usage_sink(dict(self.usage))

    # --- operations -----------------------------------------------------------------------

    def _body(self, messages: list[dict], images: Sequence[Any], **fields: Any) -> dict:
        return {"model": self.model_id, "messages": openai_messages(messages, images), "temperature": 0.0, **fields}

    def generate(
        self, prompts: Sequence[ChatPrompt], *, max_new_tokens: int, repetition_penalty: float = 1.0
    ) -> list[str]:
        """Greedy replies (stripped), one per prompt, in order. A `repetition_penalty` other than
        1.0 (none) is sent as vLLM's field of that name; a server that refuses it stops the call
        with UnsupportedSetting (OpenAI's `frequency_penalty` is another thing and is never sent)."""
        penalty = {"repetition_penalty": repetition_penalty} if repetition_penalty != 1.0 else {}
        bodies = [self._body(p.messages, p.images, max_tokens=max_new_tokens, **penalty) for p in prompts]
        replies = self.request_all(bodies, [p.record for p in prompts])
        return [_reply_text(r) for r in replies]

    def option_logliks(
        self, messages: list[dict], continuations: Sequence[str], *, images: Sequence[Any] = (),
        record: str = "the prompt",
    ) -> OptionScores:
        """Log-likelihoods (nats) of the continuations as the assistant's reply (module doc)."""
        common = {"max_tokens": 1, "prompt_logprobs": 0}
        bodies = [self._body(messages, images, add_generation_prompt=True, **common)]
        for text in continuations:
            turn = [*messages, {"role": "assistant", "content": [{"type": "text", "text": text}]}]
            bodies.append(self._body(turn, images, add_generation_prompt=False, continue_final_message=True,
                                     **common))
        replies = self.request_all(bodies, [f"{record} option {i}" for i in range(len(bodies))],
                                   check=lambda reply: self._prompt_logprobs(reply, record))
        prefix, *options = [self._prompt_logprobs(r, record) for r in replies]
        sums, counts = [], []
        for text, logprobs in zip(continuations, options):
            tail = logprobs[len(prefix):]
            if not tail:
                raise ConfigError(f"{record}: continuation {text!r} adds no prompt token on the server")
            sums.append(float(sum(tail)))
            counts.append(len(tail))
        return OptionScores(sum=sums, mean=[s / n for s, n in zip(sums, counts)], n_tokens=counts)

    def _prompt_logprobs(self, reply: dict, record: str) -> list[float]:
        """The log-probability of each prompt token after the first, from vLLM's
        `prompt_logprobs` (entry 0 is null; each other entry maps token ids to {logprob, ...}
        and, asked with 0 alternatives, holds the prompt token alone)."""
        entries = reply.get("prompt_logprobs")
        if not isinstance(entries, list) or len(entries) < 2:
            raise LoglikUnavailable(
                f"served model '{self.name}' returned no prompt log-probabilities for {record} (vLLM's "
                f"`prompt_logprobs`); {LOGLIK_HINT}"
            )
        values = []
        for entry in entries[1:]:
            if not isinstance(entry, dict) or len(entry) != 1:
                raise LoglikUnavailable(f"served model '{self.name}': unreadable prompt_logprobs entry {entry!r}")
            (info,) = entry.values()
            values.append(float(info["logprob"] if isinstance(info, dict) else info))
        return values


def _kind(body: Mapping[str, object]) -> frozenset[str]:
    """The fields beyond the OpenAI API that a request body carries."""
    return frozenset(f for f in (*LOGLIK_FIELDS, *DECODING_FIELDS) if f in body)


def _cancel_all(futures: Iterable[Future]) -> None:
    """Cancel every request of a batch not yet started."""
    for pending in futures:
        pending.cancel()


def _reply_text(reply: dict) -> str:
    """The first choice's message text, stripped ("" for a null content)."""
    message = reply["choices"][0].get("message") or {}
    return str(message.get("content") or "").strip()
