"""CEE score: five rule-based LLM judges per sample, majority vote (TinyLVLM-eHub's CEE idea).

The judge is any OpenAI-compatible chat-completions endpoint (the paper used
Qwen2.5-32B-Instruct). Requests run with bounded concurrency and retry with exponential
backoff on 429, 5xx and connection errors. Every reply is appended to a JSONL cache as it
arrives, keyed by a hash of (prompt text, model, question, reference, prediction,
temperature, max_tokens), so an interrupted run resumes and a repeated run sends nothing.
The API key is read from the environment variable named in the config at call time; it is
never logged, cached or returned.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from robustvlm.config import JudgeConfig
from robustvlm.errors import RobustVLMError
from robustvlm.evaluation.metrics.inputs import check_text_columns
from robustvlm.evaluation.metrics.judge_prompts import (
    CASE_TEMPLATE,
    PROMPTS,
    VERDICT_INSTRUCTION,
    JudgePrompt,
    parse_verdict,
)
from robustvlm.models.endpoint import EndpointClient, EndpointError
from robustvlm.redact import redacted_logger

logger = redacted_logger(__name__)

CACHE_FILE = "cee_verdicts.jsonl"


class JudgeError(EndpointError):
    """The judge endpoint failed for good (after retries, or with a non-retryable status)."""


@dataclass
class CEEResult:
    """Per-sample verdicts and their summary.

    samples[i]: {"score": 1.0 | 0.0 | None, "votes": {prompt_id: 1 | 0 | None},
    "unparsed": int, "tie": bool}; score is None on a tie or when no verdict was readable.
    summary: {"cee": mean score over decided samples (None if none), "n_samples",
    "n_decided", "n_ties", "n_no_verdict", "n_unparsed" (unreadable verdicts in all)}.
    """

    samples: list[dict]
    summary: dict


def majority_vote(votes: dict[str, int | None]) -> dict:
    """One sample's score from its judges' verdicts (None = unparsed, left out of the vote)."""
    ones = sum(v == 1 for v in votes.values())
    zeros = sum(v == 0 for v in votes.values())
    tie = ones == zeros and ones > 0
    score = None if ones == zeros else float(ones > zeros)
    return {"score": score, "votes": dict(votes), "unparsed": len(votes) - ones - zeros, "tie": tie}


def summarize(samples: Sequence[dict]) -> dict:
    """Mean CEE score over decided samples and the counts of what was not decided."""
    decided = [s["score"] for s in samples if s["score"] is not None]
    n_ties = sum(s["tie"] for s in samples)
    return {
        "cee": sum(decided) / len(decided) if decided else None,
        "n_samples": len(samples),
        "n_decided": len(decided),
        "n_ties": n_ties,
        "n_no_verdict": len(samples) - len(decided) - n_ties,
        "n_unparsed": sum(s["unparsed"] for s in samples),
    }


class CEEJudge:
    """Scores predictions with the five CEE judges.

    Args:
        config: endpoint, model and request settings.
        cache_dir: folder of the verdict cache (created if missing).
    """

    def __init__(self, config: JudgeConfig, cache_dir: str | Path):
        self.config = config
        self.cache = _ReplyCache(Path(cache_dir) / CACHE_FILE)
        self.client = ChatClient(config)

    def score(
        self, questions: Sequence[str], references: Sequence[str], predictions: Sequence[str]
    ) -> CEEResult:
        """Judge N predictions; every (sample, prompt) reply not cached yet is requested."""
        check_text_columns(
            "CEE judge",
            {"questions": questions, "references": references, "predictions": predictions},
        )
        cases = list(zip(questions, references, predictions))
        keys = [{p.id: self._key(p, *case) for p in PROMPTS} for case in cases]
        todo = {}
        for case, case_keys in zip(cases, keys):
            for prompt in PROMPTS:
                key = case_keys[prompt.id]
                if key not in self.cache and key not in todo:
                    todo[key] = prompt.messages(*case)
        if todo:
            self.client.check_key()
            self._request_all(todo)
        samples = [
            majority_vote({pid: parse_verdict(self.cache[k]) for pid, k in case_keys.items()})
            for case_keys in keys
        ]
        return CEEResult(samples=samples, summary=summarize(samples))

    def _key(self, prompt: JudgePrompt, question: str, reference: str, prediction: str) -> str:
        fields = [
            prompt.id,
            prompt.rules,
            VERDICT_INSTRUCTION,
            CASE_TEMPLATE,
            self.config.model,
            question,
            reference,
            prediction,
            self.config.temperature,
            self.config.max_tokens,
        ]
        return hashlib.sha256(json.dumps(fields).encode("utf-8")).hexdigest()

    def _request_all(self, todo: dict[str, list[dict]]) -> None:
        """Requests every reply in ``todo``, caching each as it arrives.

        On a failure no new request starts; those already in flight finish and are cached,
        then the first failure is raised.
        """
        failure: RobustVLMError | None = None
        with ThreadPoolExecutor(max_workers=self.config.max_concurrency) as pool:
            futures = {pool.submit(self.client.complete, msgs): key for key, msgs in todo.items()}
            for future in tqdm(as_completed(futures), total=len(futures), desc="CEE judge"):
                if future.cancelled():
                    continue
                try:
                    self.cache.add(futures[future], future.result())
                except RobustVLMError as err:
                    failure = failure or err
                    for pending in futures:
                        pending.cancel()
        if failure is not None:
            raise failure


class ChatClient:
    """Chat-completions requests to an OpenAI-compatible endpoint (`models.endpoint`: retries,
    timeout, key from the environment); returns the reply texts. The judge and `rm sample` (a
    policy served by vLLM or any such server) share it."""

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.endpoint = EndpointClient(config, who="judge", error=JudgeError)

    def check_key(self) -> None:
        self.endpoint.check_key()

    def complete(self, messages: list[dict]) -> str:
        """The first reply to `messages`."""
        return self.choices(messages)[0]

    def choices(self, messages: list[dict], **extra: object) -> list[str]:
        """Every reply (`choices[i].message.content`) to `messages`; `extra` adds request
        fields (e.g. n, top_p) to the config's model, temperature and max_tokens."""
        reply = self.endpoint.post("/chat/completions", {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            **extra,
        })
        try:
            contents = [choice["message"]["content"] or "" for choice in reply["choices"]]
            if not contents:
                raise IndexError("no choices")
        except (KeyError, IndexError, TypeError) as err:
            raise JudgeError(
                f"judge endpoint {self.endpoint.root} returned no chat completion ({type(err).__name__}): "
                f"{json.dumps(reply)[:200]}"
            ) from None
        return contents


class _ReplyCache:
    """Append-only JSONL of judge replies, keyed by request hash; safe across threads."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        self.replies: dict[str, str] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            self._load()

    def _load(self) -> None:
        with self.path.open(encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                try:
                    row = json.loads(line)
                    self.replies[row["key"]] = row["reply"]
                except (ValueError, KeyError, TypeError):
                    logger.warning(
                        "%s:%d: unreadable cache line ignored (asked again)", self.path, line_no
                    )

    def __contains__(self, key: str) -> bool:
        return key in self.replies

    def __getitem__(self, key: str) -> str:
        return self.replies[key]

    def add(self, key: str, reply: str) -> None:
        with self.lock:
            self.replies[key] = reply
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"key": key, "reply": reply}) + "\n")
