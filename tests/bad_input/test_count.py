"""The bad-input suite covers at least 80 kinds of bad input and misuse (one parametrised case
each, counted by pytest's own collection of this folder: with the
project's `-q` it lists one node id per case)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GOAL = 80


def test_the_suite_covers_at_least_80_kinds():
    folder = Path(__file__).parent
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider", str(folder)],
        capture_output=True, text=True, check=True,
    ).stdout
    cases = [line for line in listing.splitlines() if "::" in line and "test_count.py" not in line]
    assert len(cases) >= GOAL, f"{len(cases)} kinds of bad input, goal {GOAL}"
