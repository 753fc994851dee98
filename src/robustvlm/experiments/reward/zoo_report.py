"""The zoo reward ladder's step section: where the shortcut-failure weights fell, step by step, on
the pairs whose text cue fails and those whose cue agrees (`analysis.sfc_steps`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from robustvlm.analysis.sfc_steps import SIDES, pool_steps
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table
from robustvlm.report.plots import new_figure, save_figure

#: steps per row of the step table (results.json keeps every step)
WINDOW_FULL, WINDOW_QUICK = 10, 2


def _cell(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "—" if value is None else f"{scale * value:.{digits}f}"


def sfc_step_table(steps: Sequence[Mapping], window: int) -> Table:
    """Per window of steps, pooled over the runs: pairs, mean SFC, the main branch's share right
    (%) and mean sigmoid(gap) on the cue-failing pairs, then the same on the cue-agreeing ones."""
    rows = []
    for row in pool_steps(steps, window):
        first = max(1, row["step"] - window + 1)
        cells = [f"{first}-{row['step']}"]
        for side in SIDES:
            s = row[side]
            cells += [str(s["n"]), _cell(s["sfc"]), _cell(s["main_right"], 100.0, 1), _cell(s["main_prob"])]
        rows.append(cells)
    head = ["steps"]
    for side in ("cue fails", "cue agrees"):
        head += [f"pairs ({side})", f"mean SFC ({side})", f"main branch right, % ({side})",
                 f"main branch P(chosen) ({side})"]
    return Table(head, rows)


def sfc_step_plot(steps: Sequence[Mapping], path: Path, window: int) -> Path:
    """Mean SFC and the main branch's P(chosen) per window of steps, cue-failing against cue-agreeing pairs."""
    fig, axes = new_figure(ncols=2, size=(10.0, 3.8))
    pooled = pool_steps(steps, window)
    for ax, key, label in zip(axes, ("sfc", "main_prob"), ("mean SFC weight", "main branch P(chosen)")):
        for side in SIDES:
            points = [(r["step"], r[side][key]) for r in pooled if r[side][key] is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3,
                    label=f"cue {'fails' if side == 'failing' else 'agrees'}")
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(f"step (windows of {window})")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, path)


def sfc_step_blocks(steps: Mapping[str, Sequence[Mapping]], out_dir: Path, *, window: int) -> list[Block]:
    """The report section: what the table holds, the pooled table and the plot."""
    pooled = steps["all"]
    figure = sfc_step_plot(pooled, out_dir / "sfc_steps.png", window)
    return [Heading("The SFC weights step by step"),
            Paragraph("Every shortcut-aware run's trained pairs, pooled over seeds and training environments, "
                      f"in windows of {window} steps: on the pairs whose text cue fails (a model following the cue "
                      "ranks them wrong) and those whose cue agrees, the mean SFC weight, the main branch's share "
                      "of right rankings and its mean P(chosen) = sigmoid(r_chosen - r_rejected). The paper's "
                      "mechanism needs the failing pairs weighted above the agreeing ones."),
            sfc_step_table(pooled, window), Image(figure.name, "SFC weights per step")]
