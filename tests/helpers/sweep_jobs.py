"""Picklable stand-in jobs for the launcher tests (imported by name in spawned workers)."""

from __future__ import annotations

import os


def device_and_process(job: int) -> tuple[int, str, int]:
    """(job, the CUDA_VISIBLE_DEVICES this worker sees, its process id); a negative job raises."""
    if job < 0:
        raise ValueError(f"job {job} fails on purpose")
    return job, os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), os.getpid()
