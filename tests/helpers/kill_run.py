"""Start a `robustvlm` command in a child process and SIGKILL it once it has written something
(a checkpoint, some result rows): what the resume-after-kill tests need."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def kill_when(args: list[str], ready: Callable[[], bool], *, timeout_s: float = 240) -> None:
    """Run `python -m robustvlm.cli *args` and kill it with SIGKILL as soon as `ready()` holds
    (or after `timeout_s`)."""
    proc = subprocess.Popen([sys.executable, "-m", "robustvlm.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + timeout_s
    while time.time() < deadline and not ready() and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def kill_after_first_checkpoint(args: list[str], run: Path, *, timeout_s: float = 240) -> int:
    """Run `python -m robustvlm.cli *args` (writing into `run`), kill it with SIGKILL as soon as
    `run/checkpoints/step-*` exists, and return the newest checkpointed step."""
    kill_when(args, lambda: bool(list((run / "checkpoints").glob("step-*"))), timeout_s=timeout_s)
    assert not (run / "final").exists(), "the run finished before it could be killed"
    return max(int(p.name.split("-")[1]) for p in (run / "checkpoints").glob("step-*"))
