"""Start a `robustvlm` command in a child process and SIGKILL it once it has written a checkpoint
(what the resume-after-kill tests of training commands need)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def kill_after_first_checkpoint(args: list[str], run: Path, *, timeout_s: float = 240) -> int:
    """Run `python -m robustvlm.cli *args` (writing into `run`), kill it with SIGKILL as soon as
    `run/checkpoints/step-*` exists, and return the newest checkpointed step."""
    proc = subprocess.Popen([sys.executable, "-m", "robustvlm.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + timeout_s
    while time.time() < deadline and not list((run / "checkpoints").glob("step-*")):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run / "final").exists(), "the run finished before it could be killed"
    return max(int(p.name.split("-")[1]) for p in (run / "checkpoints").glob("step-*"))
