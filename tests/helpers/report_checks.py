"""Checks shared by the demo tests: every report opens with its verdict."""

from __future__ import annotations

import re
from pathlib import Path


def assert_opens_with_verdict(out: Path, *, html: bool = True) -> None:
    """report.md's first section after the title is `## Verdict` with text under it, and so is
    report.html's first h2."""
    sections = (out / "report.md").read_text(encoding="utf-8").split("\n\n")
    assert sections[0].startswith("# ") and sections[1] == "## Verdict" and not sections[2].startswith("#"), sections[:3]
    if html:
        assert re.findall(r"<h2>(.*?)</h2>", (out / "report.html").read_text(encoding="utf-8"))[0] == "Verdict"
