"""A tiny HTTP(S) proxy on 127.0.0.1 that records every connection made to it and answers each
request with one fixed status (502 Bad Gateway by default), so a test can point HTTP_PROXY and
HTTPS_PROXY at it and count what a command tried to send (and where), without any real network.

    with LoggingProxy() as proxy:
        env = proxy.environment()      # HTTP(S)_PROXY and ALL_PROXY pointing at it
        ...run the command with env...
    proxy.requests                     # ["CONNECT huggingface.co:443 HTTP/1.1", ...]
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping


class LoggingProxy:
    """A proxy that records the first line of each request (`requests`) and answers `status`."""

    def __init__(self, status: int = 502, reason: str = "Bad Gateway"):
        self.status, self.reason = status, reason
        self.requests: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> LoggingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (default os.environ) with every proxy variable pointing here and no NO_PROXY."""
        env = dict(os.environ if base is None else base)
        for name in ("NO_PROXY", "no_proxy"):
            env.pop(name, None)
        url = f"http://127.0.0.1:{self.port}"
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env[name] = url
        return env

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    head = conn.recv(65536)
                except OSError:
                    head = b""
                self.requests.append(head.split(b"\r\n", 1)[0].decode("latin-1") or "(connection, no request)")
                body = f"proxy says {self.status}\n".encode()
                try:
                    conn.sendall(f"HTTP/1.1 {self.status} {self.reason}\r\nContent-Length: {len(body)}\r\n"
                                 f"Connection: close\r\n\r\n".encode() + body)
                except OSError:
                    pass
