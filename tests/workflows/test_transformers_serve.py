"""`workflows.measure.transformers_serve` without `transformers serve`: a stand-in server (a
Python HTTP server that answers 200 and records its pid) started the same way, under `timeout`
in a session of its own. After the block or the command ends, the server process is gone, not
orphaned behind its killed `timeout` wrapper; a server that exits at once is one error line."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from robustvlm.workflows.measure import transformers_serve
from robustvlm.workflows.measure.transformers_serve import main, served_folder

STAND_IN = """
import http.server, os, sys
open(sys.argv[2], "w").write(str(os.getpid()))
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
"""


def _alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" not in status.read_text()
    except FileNotFoundError:
        return False


@pytest.fixture
def stand_in(monkeypatch, tmp_path) -> Path:
    """The file the stand-in server writes its pid into; `serve_command` replaced by it."""
    if not shutil.which("timeout") or not Path("/proc").is_dir():
        pytest.skip("needs coreutils timeout and /proc")
    pid_file = tmp_path / "server.pid"

    def command(folder: str, port: int, lifetime_s: int = 60) -> list[str]:
        return ["timeout", "-s", "KILL", str(lifetime_s), sys.executable, "-c", STAND_IN, str(port), str(pid_file)]
    monkeypatch.setattr(transformers_serve, "serve_command", command)
    return pid_file


def _gone(pid: int) -> bool:
    deadline = time.time() + 10
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def test_the_server_is_gone_after_the_block_however_it_ends(stand_in, tmp_path):
    with pytest.raises(RuntimeError, match="the block failed"), \
            served_folder("some/folder", tmp_path / "serve.log", start_timeout_s=30) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        pid = int(stand_in.read_text())
        assert _alive(pid) and pid != os.getpid()
        raise RuntimeError("the block failed")
    assert _gone(pid)


def test_the_command_runs_against_the_server_and_its_status_is_returned(stand_in, tmp_path, monkeypatch):
    monkeypatch.setattr(transformers_serve, "resolve_model_ref", lambda ref: ref)
    probe = ("import sys, urllib.request; reply = urllib.request.urlopen(sys.argv[1][:-3] + '/health'); "
             "open(sys.argv[2], 'w').write(sys.argv[3]); sys.exit(3 if reply.status == 200 else 1)")
    seen = tmp_path / "seen"
    code = main(["some/folder", "--log", str(tmp_path / "logs" / "serve.log"), "--", sys.executable, "-c", probe,
                 "{url}", str(seen), "{folder}"])
    assert code == 3 and seen.read_text() == "some/folder"
    assert _gone(int(stand_in.read_text()))


def test_a_server_that_exits_at_once_is_one_error_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(transformers_serve, "resolve_model_ref", lambda ref: ref)
    monkeypatch.setattr(transformers_serve, "serve_command",
                        lambda folder, port, lifetime_s=60: [sys.executable, "-c", "print('no model'); raise SystemExit(1)"])
    assert main(["some/folder", "--log", str(tmp_path / "serve.log"), "--", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: some/folder: transformers serve exited 1: no model")
