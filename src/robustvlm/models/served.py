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
log-probabilities of the prompt tokens past the bare prompt's length. A server that returns no
prompt log-probabilities gives a `LoglikUnavailable` error that says to use generation.

Token usage (prompt and completion tokens of sent requests, requests sent, cache hits) adds up
in `usage`; the workflows write it to their run folder as usage.json.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from tqdm.auto import tqdm

from robustvlm.config import ServedConfig
from robustvlm.errors import ConfigError
from robustvlm.models.chat import ChatPrompt
from robustvlm.models.concurrency import AIMD, AdaptiveLimit
from robustvlm.models.endpoint import EndpointClient, EndpointError, openai_messages
from robustvlm.models.loglik import OptionScores
from robustvlm.models.response_cache import ResponseCache, request_key

SERVED_PREFIX = "openai:"
CHAT_ROUTE = "/chat/completions"
MAX_LISTED_FAILURES = 5
USAGE_KEYS = ("requests", "cache_hits", "prompt_tokens", "completion_tokens")


class ServedRequestError(EndpointError):
    """Some requests of a call failed for good; `failures` maps each failed record to why."""

    def __init__(self, model: str, failures: dict[str, str], n_requests: int, n_unsent: int):
        self.failures, self.n_requests, self.n_unsent = failures, n_requests, n_unsent
        listed = "; ".join(f"record {rec!r}: {why}" for rec, why in list(failures.items())[:MAX_LISTED_FAILURES])
        more = len(failures) - MAX_LISTED_FAILURES
        super().__init__(
            f"served model '{model}': {len(failures)} of {n_requests} requests failed"
            + (f" ({n_unsent} more not sent)" if n_unsent else "")
            + f": {listed}" + (f"; and {more} more" if more > 0 else "")
            + ". Finished records are kept and answered requests are cached: rerun with --resume"
        )


class LoglikUnavailable(ConfigError):
    """The server returns no prompt log-probabilities: option log-likelihood is not possible."""


class _ReplyProblem(Exception):
    """A reply that arrived but holds no usable answer (not retried)."""


class ServedModel:
    """Requests to one served model.

    Args:
        name: "openai:MODEL" (MODEL is what requests name).
        config: the endpoint and request policy; `config.cache` false sends every request.
        cache: the response cache to use (default: the user cache folder's).
    """

    def __init__(self, name: str, config: ServedConfig, cache: ResponseCache | None = None):
        if not name.startswith(SERVED_PREFIX) or len(name) == len(SERVED_PREFIX):
            raise ConfigError(f"a served model is named {SERVED_PREFIX}MODEL, got {name!r}")
        self.name, self.model_id, self.config = name, name[len(SERVED_PREFIX):], config
        limit = AdaptiveLimit(AIMD(config.max_concurrency)) if config.adaptive_concurrency else None
        self.client = EndpointClient(config, who=f"served model '{name}'", limit=limit)
        self.client.check_key()
        self.cache = (cache or ResponseCache()) if config.cache else None
        self.usage: Counter[str] = Counter(dict.fromkeys(USAGE_KEYS, 0))
        self._usage_lock = threading.Lock()

    # --- requests -------------------------------------------------------------------------

    def request_all(self, bodies: Sequence[dict], records: Sequence[str], *, desc: str | None = None) -> list[dict]:
        """The replies to `bodies` (POSTed at /chat/completions), in order; cached ones are not
        sent, the rest `max_concurrency` at a time. Raises ServedRequestError (see module doc)."""
        replies: list[dict | None] = [None] * len(bodies)
        keys = [request_key(CHAT_ROUTE, b) for b in bodies]
        todo = []
        for i, key in enumerate(keys):
            cached = self.cache.get(key) if self.cache is not None else None
            if cached is not None:
                replies[i] = cached
            else:
                todo.append(i)
        self._count(cache_hits=len(bodies) - len(todo))
        failures: dict[str, str] = {}
        if todo:
            with ThreadPoolExecutor(max_workers=self.config.max_concurrency) as pool:
                futures = {pool.submit(self._send, bodies[i], keys[i]): i for i in todo}
                bar = tqdm(as_completed(futures), total=len(futures), desc=desc, disable=desc is None, leave=False)
                for future in bar:
                    if future.cancelled():
                        continue
                    i = futures[future]
                    try:
                        replies[i] = future.result()
                    except (EndpointError, _ReplyProblem) as err:
                        failures[records[i]] = str(err)
                        for pending in futures:
                            pending.cancel()
        if failures:
            unsent = sum(r is None for r in replies) - len(failures)
            raise ServedRequestError(self.name, failures, len(bodies), unsent)
        return replies  # type: ignore[return-value]  # every entry is filled when nothing failed

    def _send(self, body: dict, key: str) -> dict:
        reply = self.client.post(CHAT_ROUTE, body)
        choices = reply.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _ReplyProblem(f"the reply holds no choices: {str(reply)[:160]}")
        usage = reply.get("usage") or {}
        self._count(requests=1, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=int(usage.get("completion_tokens") or 0))
        if self.cache is not None:
            self.cache.put(key, reply)
        return reply

    def _count(self, **amounts: int) -> None:
        with self._usage_lock:
            self.usage.update(amounts)

    # --- operations -----------------------------------------------------------------------

    def _body(self, messages: list[dict], images: Sequence[Any], **fields: Any) -> dict:
        return {"model": self.model_id, "messages": openai_messages(messages, images), "temperature": 0.0, **fields}

    def generate(self, prompts: Sequence[ChatPrompt], *, max_new_tokens: int) -> list[str]:
        """Greedy replies (stripped), one per prompt, in order."""
        bodies = [self._body(p.messages, p.images, max_tokens=max_new_tokens) for p in prompts]
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
        try:
            replies = self.request_all(bodies, [f"{record} option {i}" for i in range(len(bodies))])
        except ServedRequestError as err:
            raise ServedRequestError(self.name, {
                rec: why + " (option log-likelihood needs a server that returns prompt log-probabilities, "
                "e.g. vLLM; score with --method generate otherwise)" for rec, why in err.failures.items()
            }, err.n_requests, err.n_unsent) from None
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
                "`prompt_logprobs`); this server cannot score options by log-likelihood: use --method generate"
            )
        values = []
        for entry in entries[1:]:
            if not isinstance(entry, dict) or len(entry) != 1:
                raise LoglikUnavailable(f"served model '{self.name}': unreadable prompt_logprobs entry {entry!r}")
            (info,) = entry.values()
            values.append(float(info["logprob"] if isinstance(info, dict) else info))
        return values


def _reply_text(reply: dict) -> str:
    """The first choice's message text, stripped ("" for a null content)."""
    message = reply["choices"][0].get("message") or {}
    return str(message.get("content") or "").strip()
