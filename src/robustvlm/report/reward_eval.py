"""The tables `rm eval` prints: accuracy per environment and per benchmark category for each view
(the text-only test beside the image), the SFD against the model's own text-only verdicts, and
the swap check's line."""

from __future__ import annotations

from collections.abc import Mapping

from robustvlm.analysis.reward import SFD, PairAccuracy, RewardEvalMetrics
from robustvlm.report.tables import markdown_table


def _accuracy(acc: PairAccuracy) -> str:
    return f"{100 * acc.accuracy:.1f} [{100 * acc.ci_lo:.1f}, {100 * acc.ci_hi:.1f}]"


def _sfd(sfd: SFD | None) -> str:
    return "—" if sfd is None or sfd.sfd is None else f"{100 * sfd.sfd:+.1f}"


def _table(metrics: RewardEvalMetrics, title: str, groups: Mapping[str, Mapping[str, PairAccuracy]],
           sfd_prefix: str) -> str:
    views = metrics.views
    header = [title, *(f"accuracy % ({v})" for v in views), "pairs"]
    if metrics.text_sfd:
        header.insert(-1, f"SFD vs {views[1]} (pp)")
    rows = []
    for name, acc in groups.items():
        row = [name, *(_accuracy(acc[v]) for v in views), str(acc[metrics.primary].n)]
        if metrics.text_sfd:
            row.insert(-1, _sfd(metrics.text_sfd.get(f"{sfd_prefix}:{name}" if name != "all" else "all")))
        rows.append(row)
    return markdown_table(header, rows)


def reward_eval_tables(metrics: RewardEvalMetrics) -> str:
    """Markdown: the per-environment table (with "all"), the per-category table where the
    benchmark names categories (with the macro average), and the swap check."""
    parts = [_table(metrics, "env", {**metrics.per_env, "all": metrics.overall}, "env")]
    if metrics.per_category:
        parts.append(_table(metrics, "category", metrics.per_category, "category"))
        macro = metrics.category_macro
        parts.append(f"macro average over {len(metrics.per_category)} categories "
                     f"({metrics.primary}): {100 * (macro or 0.0):.1f}%")
    swap = metrics.swap
    if swap is not None:
        parts.append(f"swap check ({swap.view}): swapped accuracy {100 * swap.swapped_accuracy:.1f}% = "
                     f"1 - accuracy - ties = {100 * swap.expected:.1f}% ({swap.n} pairs, "
                     f"{swap.near_ties} within rounding of a tie)")
    return "\n\n".join(parts)
