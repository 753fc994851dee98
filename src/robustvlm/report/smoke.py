"""A quick or smoke run's title and verdict (issue 56.3): the experiment it is a smoke test of, what
it checked, and nothing that reads as a finding.

A quick demo (`robustvlm demo NAME --quick`) or a smoke run (`study --smoke`) trains on too few
examples, seeds and steps for its figures to compare anything, so its verdict gives no interval and
no method beating, tying or trailing another: only that it is a smoke test, what ran, and the
command line that measures. Its tables stay below (docs/quick_figures.md compares them with the
code). Full runs' verdicts do not come here.
"""

from __future__ import annotations

from robustvlm.report.page import Block, Heading, Paragraph

#: the heading after a quick run's verdict, over the report's description of what ran
SETUP = "What ran"


def smoke_title(experiment: str) -> str:
    """A quick run's page title: `experiment` (what a full run's page is called), marked a smoke test."""
    return f"{experiment}: quick run (a smoke test)"


def page_title(experiment: str, quick: bool) -> str:
    """The title of a report of `experiment`: `smoke_title` for a quick or smoke run."""
    return smoke_title(experiment) if quick else experiment


def smoke_verdict(checked: str, *, flag: str = "--quick") -> list[Block]:
    """The `Verdict` section of a quick run: `checked` says what ran end to end (a clause after
    "it checked that"); `flag` is the option that made it a smoke test. It ends with the heading
    `SETUP`, so that the report's setup paragraphs that follow are not read as its verdict."""
    return [Heading("Verdict"), Paragraph(
        f"Quick run: a smoke test. It checked that {checked}. Its figures come from too few examples, seeds "
        f"and steps to compare the methods: they show that the code runs, not what the methods do, and nothing "
        f"on this page is a finding. The same command without {flag} measures."), Heading(SETUP)]
