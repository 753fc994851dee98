"""A deterministic OpenAI-compatible chat-completions server on 127.0.0.1 for judge tests.

Verdict rule: 1 when the reference (case-insensitive) occurs in the model answer, else 0.
Knobs: fail the first N requests with a status, add latency, reply with garbage or with
the inverted verdict for requests whose system prompt contains given markers. It counts
requests and records each Authorization header.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_CASE = re.compile(r"\[Reference answer\]\n(.*?)\n\n\[Model answer\]\n(.*)\Z", re.DOTALL)


class StubJudgeServer:
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
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.latency_s = latency_s
        self.garbage_markers = garbage_markers
        self.invert_markers = invert_markers
        self.requests = 0
        self.authorization: list[str | None] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> StubJudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def choices_for(self, body: dict) -> list[str]:
        """The reply texts of one request (one; a subclass may answer `n`)."""
        return [self.reply_for(body)]

    def reply_for(self, body: dict) -> str:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if any(m in system for m in self.garbage_markers):
            return "Hard to say, it depends."
        reference, prediction = _CASE.search(user).groups()
        verdict = int(reference.strip().lower() in prediction.lower())
        if any(m in system for m in self.invert_markers):
            verdict = 1 - verdict
        return f"VERDICT: {verdict}"


def _handler_for(stub: StubJudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with stub.lock:
                stub.requests += 1
                number = stub.requests
                stub.authorization.append(self.headers.get("Authorization"))
            time.sleep(stub.latency_s)
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
            elif number <= stub.fail_first:
                self._send(stub.fail_status, {"error": {"message": "stub failure"}})
            else:
                self._send(200, {
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [{"index": i, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}
                                for i, content in enumerate(stub.choices_for(body))],
                })

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            """Silence the default per-request stderr line."""

    return Handler
