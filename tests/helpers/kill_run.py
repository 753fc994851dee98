"""Kill a training command with SIGKILL as soon as it has written its first checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def kill_after_first_checkpoint(cli_args: list[str], run: Path, timeout_s: float = 240) -> int:
    """Run `python -m robustvlm.cli *cli_args` (one that trains into `run`), SIGKILL it once
    `run/checkpoints/step-*` exists, and return the newest checkpoint's step. The caller checks
    that the run had not finished."""
    proc = subprocess.Popen([sys.executable, "-m", "robustvlm.cli", *cli_args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + timeout_s
    while time.time() < deadline and not list((run / "checkpoints").glob("step-*")):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return max(int(p.name.split("-")[1]) for p in (run / "checkpoints").glob("step-*"))
