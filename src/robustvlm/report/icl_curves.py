"""The in-context pictures: accuracy against the number of demonstrations per policy (`icl eval`'s
icl_results.json rows), and accuracy per demonstration cell of `icl defined-labels`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from robustvlm.errors import DataError
from robustvlm.evaluation.in_context import ZERO_SHOT
from robustvlm.report.icl_gain import wilson
from robustvlm.report.palette import group_styles
from robustvlm.report.plots import bar_with_ci, new_figure, save_figure

ALL = "all"


def icl_curves(rows: Sequence[Mapping], path: str | Path, *, title: str) -> Path:
    """One panel per domain (the pooled "all" last): accuracy (y, 0-1) against shots k (x), one
    curve per demonstration policy, each starting at the domain's zero-shot accuracy (k = 0), with
    Wilson 95% intervals of `correct` / `n` as error bars (policies nudged apart on x so that
    their intervals stay apart). `rows`: icl_results.json's {shots, policy, domain, n, correct}."""
    cells = {(int(r["shots"]), str(r["policy"]), str(r["domain"])): (int(r["correct"]), int(r["n"])) for r in rows}
    if not cells:
        raise DataError("no in-context cell to draw")
    domains = sorted({d for _, _, d in cells} - {ALL}) + ([ALL] if any(d == ALL for _, _, d in cells) else [])
    policies = sorted({p for _, p, _ in cells} - {ZERO_SHOT})
    styles = group_styles(policies)
    fig, axes = new_figure(1, len(domains), size=(3.4 * len(domains) + 0.6, 3.6))
    axes = np.atleast_1d(axes)
    for ax, domain in zip(axes, domains):
        zero = cells.get((0, ZERO_SHOT, domain))
        for i, policy in enumerate(policies):
            points = ([(0, *zero)] if zero else []) + sorted(
                (k, *nc) for (k, p, d), nc in cells.items() if p == policy and d == domain and k > 0)
            if not points:
                continue
            ks = np.array([k for k, _, _ in points]) + 0.06 * (i - (len(policies) - 1) / 2)
            acc = np.array([c / n for _, c, n in points])
            lo, hi = np.array([wilson(c, n) for _, c, n in points]).T
            ax.errorbar(ks, acc, yerr=[acc - lo, hi - acc], color=styles[policy].colour, marker=styles[policy].marker,
                         markersize=4, capsize=2, linewidth=1.2, label=policy)
        ax.set_xticks(sorted({k for k, _, d in cells if d == domain}))
        ax.set_ylim(0, 1)
        ax.set_xlabel("demonstrations (shots)")
        ax.set_title(domain, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (Wilson 95% interval)")
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, path)


def defined_labels_bars(summary: Mapping, path: str | Path) -> Path:
    """`icl defined-labels`' accuracy (y, 0-1) per demonstration cell (x: the demonstrations'
    domain, "none" for none), Wilson 95% intervals as error bars, the chance level dotted.
    `summary`: defined_labels.json ({config, chance, cells})."""
    cells = summary["cells"]
    cfg = summary["config"]
    return bar_with_ci([c["demos"] for c in cells], [c["accuracy"] for c in cells], [c["ci"][0] for c in cells],
                       [c["ci"][1] for c in cells], path,
                       f"{cfg['model']}: defined-label accuracy on {cfg['query_domain']} queries",
                       ylabel="accuracy (Wilson 95% interval)", level=(summary["chance"], "chance"))
