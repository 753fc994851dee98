"""Report blocks and figures of reward-model generalization matrices (`analysis.reward_matrix`):
heatmaps with the i.i.d. / o.o.d. averages (the shortcut-aware paper's Figure 1), SFD per o.o.d.
cell, the reward-correlation scatter, the text-only test, length statistics, Best-of-N curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from robustvlm.analysis.reward_matrix import MatrixResults, cell_key
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table, write_page
from robustvlm.report.palette import group_styles
from robustvlm.report.plots import new_figure, readable_points, save_figure


def pct(spread: Mapping | None, *, signed: bool = False) -> str:
    """"87.3 ± 2.1" (percent; ± the std over seeds when there are several), "—" for None."""
    if spread is None:
        return "—"
    mean = f"{100 * spread['mean']:+.1f}" if signed else f"{100 * spread['mean']:.1f}"
    return mean if spread.get("std") is None else f"{mean} ± {100 * spread['std']:.1f}"


#: the width (inches) of the matrix pictures: one panel per label, stacked, so that the cells'
#: numbers can be as large as the docs' body text at the page's width
MATRIX_WIDTH_IN = 6.0


def matrix_heatmaps(results: MatrixResults, path: Path) -> Path:
    """One heatmap per label, stacked: rows = training env, columns = test env, mean accuracy
    (%) over seeds in each cell (± the std over seeds, in the same size); the diagonal (i.i.d.)
    outlined; titles give the i.i.d. and o.o.d. averages. Every number is drawn at least as large
    as the docs' body text when the picture is shown at the page's width (`plots.readable_points`)."""
    return save_figure(matrix_figure(results), path)


def matrix_figure(results: MatrixResults) -> Figure:
    """The Figure `matrix_heatmaps` writes."""
    labels = results.labels
    size = readable_points(MATRIX_WIDTH_IN)
    rows, cols = len(results.train_envs), len(results.test_envs)
    fig, axes = new_figure(len(labels), 1, size=(MATRIX_WIDTH_IN, (0.55 * rows + 1.4) * len(labels) + 0.4))
    for ax, label in zip(np.atleast_1d(axes), labels):
        grid = np.full((rows, cols), np.nan)
        for i, train in enumerate(results.train_envs):
            for j, test in enumerate(results.test_envs):
                cell = results.cells[label].get(cell_key(train, test))
                if cell is not None:
                    grid[i, j] = 100 * cell["mean"]
                    std = "" if cell["std"] is None else f" ±{100 * cell['std']:.0f}"
                    ax.text(j, i, f"{grid[i, j]:.0f}{std}", ha="center", va="center", fontsize=size)
                if train == test:
                    ax.add_patch(_outline(j, i))
        ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
        ax.set_xticks(range(cols), results.test_envs, fontsize=size)
        ax.set_yticks(range(rows), results.train_envs, fontsize=size)
        ax.set_ylabel("trained on", fontsize=size)
        avg = results.averages[label]
        ax.set_title(f"{label}: i.i.d. {pct(avg['iid'])} · o.o.d. {pct(avg['ood'])}", fontsize=size)
    np.atleast_1d(axes)[-1].set_xlabel("tested on", fontsize=size)
    fig.suptitle(f"Pairwise accuracy (%), mean ± std over {len(results.seeds)} seed(s)", fontsize=size)
    return fig


def _outline(x: int, y: int) -> Rectangle:
    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.6)


def sfd_bars(results: MatrixResults, path: Path) -> Path | None:
    """Grouped bars of SFD (percentage points) per o.o.d. cell, one bar per compared label,
    error bars = std over seeds; None when no SFD was computed."""
    labels = [lb for lb in results.labels if results.sfd.get(lb)]
    cells = sorted({k for lb in labels for k in results.sfd[lb]})
    if not cells:
        return None
    fig, ax = new_figure(size=(max(6.0, 0.55 * len(cells) * len(labels) + 2), 4.0))
    width = 0.8 / len(labels)
    x = np.arange(len(cells))
    for i, label in enumerate(labels):
        entries = [results.sfd[label].get(c) for c in cells]
        means = [100 * e["mean"] if e else np.nan for e in entries]
        stds = [100 * (e["std"] or 0) if e else 0 for e in entries]
        ax.bar(x + (i - (len(labels) - 1) / 2) * width, means, width, yerr=stds, capsize=3, label=label)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, [c.replace("->", "→") for c in cells], rotation=35, ha="right")
    ax.set_ylabel("SFD (accuracy points)")
    ax.set_title("Shortcut-failure degradation per o.o.d. cell (lower is better)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def gap_scatter(points: Mapping[str, Sequence[tuple[float, float, str]]], path: Path) -> Path | None:
    """One panel per label: its reward difference against the text-only model's on o.o.d. pairs,
    coloured by test environment, Pearson r in the title; None without points."""
    labels = [lb for lb, pts in points.items() if pts]
    if not labels:
        return None
    fig, axes = new_figure(1, len(labels), size=(4.4 * len(labels), 4.0))
    for ax, label in zip(np.atleast_1d(axes), labels):
        pts = points[label]
        for env, style in group_styles(sorted({e for _, _, e in pts})).items():
            xs = [x for x, _, e in pts if e == env]
            ys = [y for _, y, e in pts if e == env]
            ax.scatter(xs, ys, s=8, alpha=0.6, label=env, color=style.colour, marker=style.marker)
        x_all, y_all = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
        r = np.corrcoef(x_all, y_all)[0, 1] if x_all.std() > 0 and y_all.std() > 0 else float("nan")
        ax.axhline(0, color="grey", linewidth=0.6)
        ax.axvline(0, color="grey", linewidth=0.6)
        ax.set_xlabel("text-only model: r_chosen − r_rejected")
        ax.set_ylabel(f"{label}: r_chosen − r_rejected")
        ax.set_title(f"{label} vs text-only (o.o.d. pairs), r = {r:.2f}", fontsize=9)
        ax.legend(fontsize=7, title="test env", title_fontsize=7)
    return save_figure(fig, path)


def bon_curves(curves: Mapping[str, Sequence[Mapping]], path: Path, *, gold: str) -> Path:
    """Expected gold score of the best-of-N pick against N (log axis), one line per reward model."""
    fig, ax = new_figure(size=(6.0, 4.0))
    for label, rows in curves.items():
        ax.plot([r["n"] for r in rows], [r["mean"] for r in rows], marker="o", markersize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (candidates the reward model picks from)")
    ax.set_ylabel(f"expected gold score ({gold})")
    ax.set_title("Best-of-N (unbiased estimator over K sampled candidates)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def sfd_cells_text(results: MatrixResults, label: str) -> str:
    """"k of n" o.o.d. cells whose SFD the mean covers, summed over seeds ("—" without SFD)."""
    counts = results.sfd_cells.get(label)
    if not counts:
        return "—"
    return f"{sum(counts['defined'])} of {sum(counts['cells'])}"


def summary_table(results: MatrixResults) -> Table:
    """Per label: i.i.d. and o.o.d. averages and the mean SFD, each mean ± std over seeds, and how
    many o.o.d. cells (over all seeds) had a defined SFD."""
    rows = [[label, pct(results.averages[label]["iid"]), pct(results.averages[label]["ood"]),
             pct(results.sfd_average.get(label), signed=True), sfd_cells_text(results, label)]
            for label in results.labels]
    return Table(["model", "i.i.d. accuracy (%)", "o.o.d. accuracy (%)", "mean SFD (points)",
                  "o.o.d. cells with SFD"], rows)


def cell_tables(results: MatrixResults) -> list[Block]:
    """The matrices as tables (mean ± std per cell), one per label."""
    blocks: list[Block] = []
    for label in results.labels:
        rows = [[train, *(pct(results.cells[label].get(cell_key(train, test))) for test in results.test_envs)]
                for train in results.train_envs]
        blocks += [Paragraph(f"`{label}` (rows: trained on; columns: tested on)"),
                   Table(["train \\ test", *results.test_envs], rows)]
    return blocks


def sfd_table(results: MatrixResults) -> Table | None:
    labels = [lb for lb in results.labels if results.sfd.get(lb)]
    cells = sorted({k for lb in labels for k in results.sfd[lb]})
    if not cells:
        return None
    rows = [[c.replace("->", " → "), *(pct(results.sfd[lb].get(c), signed=True) for lb in labels),
             *(f"{results.correlation[lb][c]['mean']:+.2f}" if c in results.correlation.get(lb, {}) else "—"
               for lb in labels)]
            for c in cells]
    header = ["o.o.d. cell", *(f"SFD {lb}" for lb in labels), *(f"r({lb}, text-only)" for lb in labels)]
    return Table(header, rows)


def text_only_table(results: MatrixResults) -> Table | None:
    """On the diagonal: accuracy with the image and without it (the runs' text-only test)."""
    rows = [[label, env, *(pct(s) for s in views.values())]
            for label, envs in results.text_only_test.items() for env, views in envs.items()]
    if not rows:
        return None
    return Table(["model", "i.i.d. environment", "with the image (%)", "without (%)"], rows)


def length_table(results: MatrixResults) -> Table:
    rows = [[env, f"{100 * s['chosen_longer']:.0f}", f"{100 * s['chosen_shorter']:.0f}", f"{100 * s['equal']:.0f}",
             str(s["balanced_pairs"]), *(pct(results.length_balanced.get(lb, {}).get(env)) for lb in results.labels)]
            for env, s in results.lengths.items()]
    header = ["test env", "chosen longer (%)", "chosen shorter (%)", "equal (%)", "balanced pairs",
              *(f"{lb}: i.i.d. acc., length-balanced" for lb in results.labels)]
    return Table(header, rows)


def swap_table(results: MatrixResults) -> Table:
    """Per label: runs checked, mean swapped accuracy, mean 1 - accuracy - ties, largest gap."""
    rows = [[label, str(c["runs"]), f"{100 * c['swapped_accuracy']:.1f}", f"{100 * c['expected']:.1f}",
             f"{100 * c['max_abs_difference']:.1f}"] for label, c in results.swap.items()]
    return Table(["model", "runs", "swapped accuracy %", "1 - accuracy - ties %", "largest gap (pp)"], rows)


def matrix_blocks(
    results: MatrixResults, out_dir: Path, *, points: Mapping[str, Sequence] | None = None
) -> list[Block]:
    """The matrix section of a report (figures written into `out_dir`)."""
    blocks: list[Block] = [Heading("Generalization matrices"), summary_table(results),
                           Image(matrix_heatmaps(results, out_dir / "matrix_heatmaps.png").name,
                                 "generalization matrices")]
    blocks += cell_tables(results)
    sfd_png = sfd_bars(results, out_dir / "sfd.png")
    table = sfd_table(results)
    if table is not None:
        blocks += [Heading("Shortcut-failure degradation"), Paragraph(
            "Per o.o.d. cell, test pairs are split by whether the text-only model (same seed, same "
            "training environment) ranks them right; SFD = accuracy on its successes minus on its "
            "failures, in points (lower = less reliance on the text shortcut). `r` is the Pearson "
            "correlation of the model's and the text-only model's reward differences."), table]
        if sfd_png is not None:
            blocks.append(Image(sfd_png.name, "SFD per o.o.d. cell"))
    scatter = gap_scatter(points or {}, out_dir / "reward_correlation.png")
    if scatter is not None:
        blocks.append(Image(scatter.name, "reward differences against the text-only model's"))
    table = text_only_table(results)
    if table is not None:
        blocks += [Heading("Text-only test"), Paragraph(
            "On the diagonal: the same model scored with its image and without it."), table]
    if results.swap:
        blocks += [Heading("Swap check"), Paragraph(
            "Every test pair scored a second time with chosen and rejected swapped: a reward model "
            "scores each response on its own, so the swapped accuracy must equal 1 - accuracy - "
            "ties (every run passed, or the matrix would have stopped at the first failing pair)."),
            swap_table(results)]
    blocks += [Heading("Length statistics"), Paragraph(
        "Share of test pairs whose chosen response is longer / shorter / as long (in words), and "
        "each model's i.i.d. accuracy on a length-balanced subset (as many chosen-longer as "
        "chosen-shorter pairs)."), length_table(results)]
    return blocks


def write_matrix_report(
    results: MatrixResults, out_dir: Path, *, title: str, points: Mapping[str, Sequence] | None = None
) -> tuple[Path, Path]:
    """report.md and report.html of a matrix run."""
    blocks = [Heading(title, 1), *matrix_blocks(results, out_dir, points=points)]
    return write_page(blocks, out_dir, title=title)
