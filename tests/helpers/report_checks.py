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


#: what a finding says: a method beating, tying or trailing another, an interval, a test's call. A
#: quick or smoke run's verdict says none of it (issue 56.3; `robustvlm.report.smoke`).
FINDING = re.compile(r"\b(beats?|ties?|tied|better|worse|helped|interval|excluding zero|CI|p-value|seed spread|"
                     r"one seed only|concluded|goal|met)\b", re.IGNORECASE)


def verdict_text(report_md: str) -> str:
    """The paragraphs under a report's first `## Verdict` heading, up to the next heading."""
    return report_md.split("\n## Verdict\n", 1)[1].split("\n#", 1)[0].strip()


def assert_smoke_verdict_only(report_md: str, experiment: str | None = None) -> None:
    """A quick run's report: its title is `experiment` marked a smoke test (not the generic
    "robustvlm study"), and its verdict says that it is a smoke test and what it checked, with no
    sentence that reads as a finding (`FINDING`)."""
    title = report_md.splitlines()[0]
    assert title.endswith(": quick run (a smoke test)") and "robustvlm study" not in title, title
    if experiment is not None:
        assert title == f"# {experiment}: quick run (a smoke test)", title
    verdict = verdict_text(report_md)
    assert verdict.startswith("Quick run: a smoke test. It checked that "), verdict
    assert not FINDING.findall(verdict), (FINDING.findall(verdict), verdict)


def without_data_read(results: dict) -> dict:
    """A demo's results.json without the data it read and the machine that wrote it
    (`data.provenance.DATA_KEY`, `machine.MACHINE_KEY`, added beside what the demo's own class
    wrote): what that class reads back and writes again."""
    from robustvlm.data.provenance import DATA_KEY
    from robustvlm.machine import MACHINE_KEY

    return {key: value for key, value in results.items() if key not in (DATA_KEY, MACHINE_KEY)}
