"""A deterministic OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

It answers each request with `answer(body)` (default: "echo: " and the last user text), keeps
every request body and Authorization header, and injects faults: `faults` is consumed one entry
per request, in arrival order ("429", "500", any other status code, "slow": answer after
`slow_s`, "malformed": a 200 whose body is not JSON, "empty": a 200 with no choices, "huge": a
200 of `huge_bytes` bytes, as from a server that ignores max_tokens, None: a normal answer);
`fault_for(body)` may add faults keyed by the request itself. A request carrying one of
`refuse_fields` is answered HTTP 422 "Unexpected fields in the request: {...}", as
`transformers serve` answers fields beyond the OpenAI API. With
`prompt_logprobs`, a request asking for them (vLLM's extension) gets one entry per prompt token
as vLLM writes them: null first, then {token_id: {"logprob", "rank", "decoded_token"}}. The
prompt's tokens are `prompt_tokens(body)`: the words of each text part, "<image>" per image,
and "<assistant>" where the assistant's turn starts; a word's log-probability is `word_logprob`.
With `capacity`, a request arriving while `capacity` others are in flight is refused at once
with HTTP 429 (a rate-limited server; `refused` counts them, `max_in_flight` is the most
admitted at once). With `lifetime_s`, the server stops by itself after that many seconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def word_logprob(word: str) -> float:
    """The stub's log-probability of a prompt token: longer words are less likely."""
    return -0.1 * len(word)


def prompt_tokens(body: dict) -> list[str]:
    """The stub's tokens of a request's prompt (see the module docstring)."""
    tokens: list[str] = []
    for message in body["messages"]:
        if message["role"] == "assistant":
            tokens.append("<assistant>")
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for part in parts:
            tokens += ["<image>"] if part["type"] == "image_url" else part["text"].split()
    if body.get("add_generation_prompt", True) and not body.get("continue_final_message"):
        tokens.append("<assistant>")
    return tokens


def last_user_text(body: dict) -> str:
    """The text of the last user message."""
    user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return user if isinstance(user, str) else " ".join(p["text"] for p in user if p["type"] == "text")


class StubOpenAIServer:
    """Context manager; `url` is the API root to give as --base-url."""

    def __init__(
        self,
        *,
        answer: Callable[[dict], str] | None = None,
        faults: list[str | None] | None = None,
        fault_for: Callable[[dict], str | None] | None = None,
        latency_s: float = 0.0,
        slow_s: float = 2.0,
        prompt_logprobs: bool = True,
        capacity: int | None = None,
        lifetime_s: float | None = None,
        refuse_fields: tuple[str, ...] = (),
        huge_bytes: int = 4 << 20,
    ):
        self.refuse_fields, self.huge_bytes = refuse_fields, huge_bytes
        self.answer = answer or (lambda body: "echo: " + last_user_text(body))
        self.faults = list(faults or [])
        self.fault_for = fault_for
        self.latency_s, self.slow_s, self.prompt_logprobs = latency_s, slow_s, prompt_logprobs
        self.requests = 0
        self.capacity, self.in_flight, self.max_in_flight, self.refused = capacity, 0, 0, 0
        self.lifetime = threading.Timer(lifetime_s, lambda: self.httpd.shutdown()) if lifetime_s else None
        self.bodies: list[dict] = []
        self.authorization: list[str | None] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> StubOpenAIServer:
        self.thread.start()
        if self.lifetime is not None:
            self.lifetime.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.lifetime is not None:
            self.lifetime.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()

    def admit(self) -> bool:
        """Count a request in flight, or refuse it (False) when `capacity` are already."""
        with self.lock:
            if self.capacity is not None and self.in_flight >= self.capacity:
                self.refused += 1
                return False
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return True

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def next_fault(self, body: dict) -> str | None:
        """The fault of the request that just arrived (already counted)."""
        with self.lock:
            queued = self.faults.pop(0) if self.faults else None
        return queued or (self.fault_for(body) if self.fault_for else None)

    def choices_for(self, body: dict) -> list[str]:
        """The reply texts of one request."""
        return [self.answer(body)]

    def completion(self, body: dict) -> dict:
        """The JSON reply of a normal answer."""
        tokens = prompt_tokens(body)
        reply: dict = {
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        for i, text in enumerate(self.choices_for(body))],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": 3, "total_tokens": len(tokens) + 3},
        }
        if self.prompt_logprobs and body.get("prompt_logprobs") is not None:
            reply["prompt_logprobs"] = [None] + [
                {str(1000 + i): {"logprob": word_logprob(t), "rank": 1, "decoded_token": t}}
                for i, t in enumerate(tokens[1:])
            ]
        return reply


def _handler_for(stub: StubOpenAIServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class of one stub server."""
    return type("Handler", (_StubHandler,), {"stub": stub})


class _StubHandler(BaseHTTPRequestHandler):
    """Answers the requests of `stub` (set on a subclass by `_handler_for`)."""

    stub: StubOpenAIServer

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        stub = self.stub
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with stub.lock:
            stub.requests += 1
            stub.bodies.append(body)
            stub.authorization.append(self.headers.get("Authorization"))
        if not stub.admit():
            self._send(429, {"error": {"message": "stub: too many requests in flight"}})
            return
        try:
            self._answer(body)
        finally:
            stub.leave()

    def _answer(self, body: dict) -> None:
        stub = self.stub
        fault = stub.next_fault(body)
        time.sleep(stub.slow_s if fault == "slow" else stub.latency_s)
        refused = {f for f in stub.refuse_fields if f in body}
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
        elif refused:
            self._send(422, {"detail": f"Unexpected fields in the request: {refused}"})
        elif fault in _FAULT_REPLIES:
            _FAULT_REPLIES[fault](self, body)
        elif fault not in (None, "slow"):
            self._send(int(fault), {"error": {"message": f"stub failure {fault}"}})
        else:
            self._send(200, stub.completion(body))

    def _send(self, status: int, payload: dict) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"))

    def _send_huge(self, reply: dict) -> None:
        """`reply` with a "padding" field of `huge_bytes` bytes, written in 64 KiB pieces (the
        stub itself never holds the whole reply)."""
        size = self.stub.huge_bytes
        head, tail, piece = b'{"padding": "', b'", ' + json.dumps(reply)[1:].encode("utf-8"), b"x" * (64 << 10)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(head) + size + len(tail)))
            self.end_headers()
            self.wfile.write(head)
            for start in range(0, size, len(piece)):
                self.wfile.write(piece[: size - start])
            self.wfile.write(tail)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what a size limit does

    def _send_bytes(self, status: int, data: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer

    def log_message(self, *args) -> None:
        """Silence the default per-request stderr line."""


# The replies of the faults that answer 200 with a bad body (the module docstring).
_FAULT_REPLIES: dict[str, Callable[[_StubHandler, dict], None]] = {
    "huge": lambda handler, body: handler._send_huge(handler.stub.completion(body)),
    "malformed": lambda handler, body: handler._send_bytes(200, b'{"choices": [{"message": '),
    "empty": lambda handler, body: handler._send(200, {"object": "chat.completion", "choices": []}),
}
