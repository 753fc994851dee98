"""The paired-comparison table of reports: `compare`'s output, the study report's and the mc eval
report's section (one row per `analysis.paired.PairedComparison`), written one way everywhere."""

from __future__ import annotations

from collections.abc import Sequence

from robustvlm.analysis.paired import PairedComparison
from robustvlm.report.page import Block, Heading, Paragraph, Table

DASH = "—"


def paired_header(power_delta: float, a: str = "A", b: str = "B") -> list[str]:
    """The columns `paired_cells` fills, `a` and `b` naming the two sides."""
    return ["n", f"mean {a}", f"mean {b}", f"{a} − {b}", "95% CI (paired bootstrap)", "SE", f"only {a} / only {b}", "McNemar p",
            f"n for ±{power_delta:g} at 80% power"]


def mcnemar_cell(c: PairedComparison) -> tuple[str, str]:
    """(discordant counts, exact McNemar p) of a 0/1 comparison; dashes for other scores."""
    if c.only_a is None or c.mcnemar_p is None:
        return DASH, DASH
    return f"{c.only_a} / {c.only_b}", f"{c.mcnemar_p:.3g}"


def paired_cells(c: PairedComparison, mcnemar: tuple[str, str] | None = None) -> list[str]:
    """One row of the table: n, both means, the difference with its interval and (clustered) SE,
    the McNemar cells (`mcnemar` replaces the comparison's own) and the questions needed."""
    only, p = mcnemar or mcnemar_cell(c)
    needed = DASH if c.questions_needed is None else str(int(-(-c.questions_needed // 1)))
    return [str(c.n), f"{c.mean_a:.4f}", f"{c.mean_b:.4f}", f"{c.difference:+.4f}",
            f"[{c.ci_lo:+.4f}, {c.ci_hi:+.4f}]", f"{c.se:.4f}", only, p, needed]


def paired_section(title: str, explanation: str, header: list[str], rows: Sequence[list[str]]) -> list[Block]:
    """A report section: heading, what the table shows, the table (nothing when no rows)."""
    if not rows:
        return []
    return [Heading(title), Paragraph(explanation), Table(header, [list(r) for r in rows])]


POWER_NOTE = (
    "The last column is the number of questions a difference of that size needs to be detected at 80% "
    "power by a two-sided paired t-test at the 5% level, given the observed spread of the differences "
    "(— when the two sides never differ)."
)
