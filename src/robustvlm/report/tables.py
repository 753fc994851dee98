"""Markdown tables and number formatting for reports."""

from __future__ import annotations

from robustvlm.analysis.summary import EvalMetrics


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table; None (a metric that was not computed) shows as an em dash."""
    return "—" if value is None else f"{value:.{digits}f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def env_table(metrics: EvalMetrics, metric: str) -> str:
    """Per-environment scores of one evaluation, then the in-domain and out-of-domain means."""
    rows = [
        [env, "OOD" if info.ood else "ID", str(info.n), fmt(info.scores.get(metric))]
        for env, info in metrics.per_env.items()
    ]
    rows.append(["**in-domain mean**", "", "", fmt(metrics.id.get(metric))])
    rows.append(["**out-of-domain mean**", "", "", fmt(metrics.ood.get(metric))])
    return markdown_table(["environment", "type", "n", metric], rows)
