"""A deterministic judge on the stub OpenAI-compatible server (`stub_openai_server`).

Verdict rule: 1 when the reference (case-insensitive) occurs in the model answer, else 0.
Knobs: fail the first N requests with a status, add latency, reply with garbage or with
the inverted verdict for requests whose system prompt contains given markers. It counts
requests and records each Authorization header.
"""

from __future__ import annotations

import re

from stub_openai_server import StubOpenAIServer

_CASE = re.compile(r"\[Reference answer\]\n(.*?)\n\n\[Model answer\]\n(.*)\Z", re.DOTALL)


class StubJudgeServer(StubOpenAIServer):
    """Context manager; ``url`` is the API root to put in ``JudgeConfig.base_url``."""

    def __init__(
        self,
        *,
        fail_first: int = 0,
        fail_status: int = 503,
        latency_s: float = 0.0,
        garbage_markers: tuple[str, ...] = (),
        invert_markers: tuple[str, ...] = (),
    ):
        super().__init__(answer=self.reply_for, faults=[str(fail_status)] * fail_first, latency_s=latency_s)
        self.garbage_markers = garbage_markers
        self.invert_markers = invert_markers

    def reply_for(self, body: dict) -> str:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if any(m in system for m in self.garbage_markers):
            return "Hard to say, it depends."
        reference, prediction = _CASE.search(user).groups()
        verdict = int(reference.strip().lower() in prediction.lower())
        if any(m in system for m in self.invert_markers):
            verdict = 1 - verdict
        return f"VERDICT: {verdict}"
