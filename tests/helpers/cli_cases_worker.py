"""Run several `robustvlm` command lines in one fresh process (one import of torch and
transformers for all of them), each as the command line runs it (`robustvlm.cli.main`), and print
one JSON object per line: {"case", "code", "out", "err"}.

    python cli_cases_worker.py CASES.json [PROXY_PORT]

CASES.json maps a case name to its argv. With PROXY_PORT, a line `SENTINEL <case>` is sent to
that port before each case, so a logging proxy (`logging_proxy.LoggingProxy`) can tell which
case made each connection it records.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import sys


def _sentinel(port: int, case: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(f"SENTINEL {case}\r\n\r\n".encode())
        conn.recv(1024)


def main() -> None:
    from robustvlm.cli import main as robustvlm

    cases = json.loads(open(sys.argv[1], encoding="utf-8").read())
    port = int(sys.argv[2]) if len(sys.argv) > 2 else None
    for case, argv in cases.items():
        if port is not None:
            _sentinel(port, case)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = robustvlm(argv)
            except SystemExit as exit_:
                code = int(exit_.code or 0)
            except BaseException as exc:  # noqa: BLE001 - reported as the traceback the user would see
                import traceback

                traceback.print_exc()
                code = f"raised {type(exc).__name__}"
        print(json.dumps({"case": case, "code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)


if __name__ == "__main__":
    main()
