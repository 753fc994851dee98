"""A saved model folder served by Hugging Face's `transformers serve` (the `serve` extra) on
127.0.0.1 for the length of one command, and nothing left running after it.

The server runs in a session of its own under `timeout -s KILL LIFETIME` (where `timeout`
exists), so that one signal to its process group ends the wrapper and the server together:
killing only the wrapper's pid would leave the server running, orphaned. `served_folder` is the
context manager (it yields the API root, `http://127.0.0.1:PORT/v1`); the module's command line
runs one command against it:

    python -m robustvlm.workflows.measure.transformers_serve MODEL [--log FILE] -- COMMAND ...

MODEL is a folder or `zoo:NAME`; in COMMAND, `{folder}` is replaced by the served folder and
`{url}` by the API root. The exit status is COMMAND's (2, with one error line, when the server
does not start).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from robustvlm.errors import ConfigError, RobustVLMError
from robustvlm.model_ref import ModelRef
from robustvlm.models.zoo_recipes import resolve_model_ref

#: The server kills itself after this many seconds, whatever happens to its caller.
LIFETIME_S = 1800
START_TIMEOUT_S = 240


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command(folder: str, port: int, lifetime_s: int = LIFETIME_S) -> list[str]:
    """The command line of `transformers serve FOLDER` on 127.0.0.1:`port`, on the CPU, run by this
    Python (its `transformers` entry point) under `timeout -s KILL lifetime_s` where it exists."""
    command = [sys.executable, "-c", "import sys; from transformers.cli.transformers import main; "
               "sys.argv[0] = 'transformers'; sys.exit(main())",
               "serve", folder, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    if shutil.which("timeout"):
        command = ["timeout", "-s", "KILL", str(lifetime_s), *command]
    return command


def _wait_healthy(proc: subprocess.Popen, root: str, log: Path, start_timeout_s: float) -> None:
    deadline = time.time() + start_timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise ConfigError(f"transformers serve exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(root + "/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise ConfigError(f"transformers serve did not start in {start_timeout_s:g} s: {log.read_text()[-2000:]}")


def stop_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group `proc` leads (the wrapper and the server) and reap `proc`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@contextlib.contextmanager
def served_folder(folder: str, log: Path, *, lifetime_s: int = LIFETIME_S,
                  start_timeout_s: float = START_TIMEOUT_S) -> Iterator[str]:
    """Serve `folder` with `transformers serve` (its output into `log`) while the block runs;
    yields the API root. ConfigError when the server exits or is not healthy within
    `start_timeout_s`; the server's process group is killed on leaving, however the block ends."""
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen(serve_command(folder, port, lifetime_s), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        root = f"http://127.0.0.1:{port}"
        _wait_healthy(proc, root, log, start_timeout_s)
        yield root + "/v1"
    finally:
        stop_group(proc)


def main(argv: list[str]) -> int:
    """Run COMMAND against MODEL served by `transformers serve` (module doc)."""
    parser = argparse.ArgumentParser(prog="python -m robustvlm.workflows.measure.transformers_serve",
                                     description=__doc__.strip().splitlines()[0])
    parser.add_argument("model", help="a saved model folder or zoo:NAME")
    parser.add_argument("--log", default="transformers_serve.log", help="the server's output (transformers_serve.log)")
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]
    if not command:
        parser.error("give the command to run after --: MODEL [--log FILE] -- COMMAND ...")
    try:
        folder = resolve_model_ref(ModelRef.parse(args.model)).name  # its own command line: the option read here
        Path(args.log).parent.mkdir(parents=True, exist_ok=True)
        with served_folder(folder, Path(args.log)) as url:
            return subprocess.call([part.format(folder=folder, url=url) for part in command])
    except RobustVLMError as err:
        print(f"error: {args.model}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
