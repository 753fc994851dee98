"""Small plotting helpers shared by the report pages (matplotlib, Agg canvas, PNG files).

Figures are built with `matplotlib.figure.Figure` (no pyplot), so nothing here touches the
global backend or leaks open figures; `save_figure` writes them as PNG.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from PIL import Image

from robustvlm.errors import DataError

DPI = 150
#: the docs site's content column (px) in a 1280-px-wide window (measured in Chromium) and its body text (px): a picture
#: wider than the column is shown shrunk to it
PAGE_WIDTH_PX, BODY_TEXT_PX = 690, 16
#: the PNG text key under which `save_figure` keeps the data a picture plots (JSON)
DATA_KEY = "robustvlm-data"
#: Accuracies (in %) offered as tick positions on transformed axes.
PERCENT_TICKS = (0.1, 0.5, 1, 2, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 98, 99, 99.5, 99.9)
#: the order in which ticks are kept when they crowd: the roundest first
TICK_PRIORITY = (50, 10, 90, 1, 99, 30, 70, 20, 80, 5, 95, 40, 60, 0.1, 99.9, 2, 98, 0.5, 99.5)
#: the least distance between two tick labels, as a share of the axis (x labels are wider)
TICK_GAP_X, TICK_GAP_Y = 0.09, 0.05


def new_figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (6.0, 4.5)) -> tuple[Figure, Any]:
    """A Figure with an (nrows, ncols) grid of axes; returns (fig, axes), axes squeezed
    (one Axes, or an array of them: Any)."""
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True)
    return fig, axes


def readable_points(width_in: float) -> float:
    """The font size (points) that shows at least as large as the docs' body text when a figure
    `width_in` inches wide (DPI px per inch) is shown at the page's width (shrunk to
    PAGE_WIDTH_PX when wider)."""
    shown = min(PAGE_WIDTH_PX, width_in * DPI)
    return BODY_TEXT_PX * 72 * width_in / shown


def save_figure(fig: Figure, path: str | Path, data: object = None) -> Path:
    """Write `fig` as a PNG at `path` (parent folders are created); returns the path. With `data`
    (JSON-able: what the picture plots), the PNG keeps it as text (`plotted_data` reads it back),
    so a test can check a picture against its source without comparing pixels."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = None if data is None else {DATA_KEY: json.dumps(data, sort_keys=True)}
    fig.savefig(path, dpi=DPI, format="png", metadata=metadata)
    return path


def plotted_data(path: str | Path) -> object:
    """The data `save_figure` kept in the PNG at `path`; None when it kept none."""
    with Image.open(path) as image:
        text = getattr(image, "text", {}).get(DATA_KEY)
    return None if text is None else json.loads(text)


def _spaced(percents: Sequence[float], forward: Callable[[np.ndarray], np.ndarray], span: np.ndarray,
            gap: float) -> list[float]:
    """The `percents` kept, in TICK_PRIORITY order, where each lies at least `gap` (a share of
    `span`, the axis in plotted units) from every one kept before; sorted."""
    width = abs(float(span[1] - span[0])) or 1.0
    kept: list[float] = []
    for p in sorted(percents, key=TICK_PRIORITY.index):
        at = float(forward(np.asarray([p / 100]))[0])
        if all(abs(at - float(forward(np.asarray([k / 100]))[0])) >= gap * width for k in kept):
            kept.append(p)
    return sorted(kept)


def percent_axis(
    ax: Axes,
    which: str,
    forward: Callable[[np.ndarray], np.ndarray],
    limits: tuple[float, float],
    *,
    label: str = "",
) -> None:
    """Label a transformed accuracy axis with percentages.

    Data on `ax` is plotted in transformed units (e.g. probit); ticks are placed at
    `forward(p)` for the accuracies p in PERCENT_TICKS that fall within `limits` (fractions) and
    lie at least a TICK_GAP share of the axis from each other (the roundest kept first, so that
    labels never collide where the transform crowds them), or at three evenly spaced percentages
    when fewer than three of those fit.

    Args:
        which: "x" or "y".
        forward: the accuracy transform, fractions -> plotted units.
        limits: (lo, hi) accuracy fractions shown on the axis.
    """
    lo, hi = limits
    span = forward(np.asarray([lo, hi]))
    percents = _spaced([p for p in PERCENT_TICKS if lo <= p / 100 <= hi], forward, span,
                       TICK_GAP_X if which == "x" else TICK_GAP_Y)
    if len(percents) < 3:  # a narrow range: evenly spaced round percentages instead
        percents = sorted(set(np.round(np.linspace(lo, hi, 5)[1:-1] * 100, 1).tolist()))
    positions = forward(np.asarray(percents) / 100)
    labels = [f"{p:g}%" for p in percents]
    if which == "x":
        ax.set_xlim(*span)
        ax.set_xticks(positions, labels)
        ax.set_xlabel(label)
    else:
        ax.set_ylim(*span)
        ax.set_yticks(positions, labels)
        ax.set_ylabel(label)


def plot_series(
    rows: Sequence[Mapping[str, float]] | Mapping[str, Sequence[Mapping[str, float]]],
    keys: Sequence[str],
    path: str | Path,
    title: str,
    *,
    x_key: str = "step",
    log_keys: Sequence[str] = (),
) -> Path:
    """One panel per key of a quantity logged over steps (e.g. train_log.jsonl rows).

    `rows` is one run's rows, or a mapping {label: rows} to overlay several runs with a legend.
    Rows without a key (e.g. evaluation rows in a training log) are not part of that key's
    curve; a key that no row carries is an error. Panels share the x axis; keys in
    `log_keys` get a logarithmic y axis (for quantities such as lambda that span decades).
    """
    runs = dict(rows) if isinstance(rows, Mapping) else {"": rows}
    fig, axes = new_figure(len(keys), 1, size=(7.0, 2.2 * len(keys) + 0.6))
    axes = np.atleast_1d(axes)
    for ax, key in zip(axes, keys):
        drawn = 0
        for label, run in runs.items():
            points = [(r[x_key], r[key]) for r in run if key in r and x_key in r]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, linewidth=1.2, label=label or None)
                drawn += 1
        if not drawn:
            raise DataError(f"no row has both {x_key!r} and {key!r} to plot")
        ax.set_ylabel(key)
        if key in log_keys:
            ax.set_yscale("symlog", linthresh=1e-3)
        ax.grid(alpha=0.3)
        if len(runs) > 1:
            ax.legend(fontsize=8)
    for ax in axes[:-1]:
        ax.sharex(axes[-1])
        ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel(x_key)
    fig.suptitle(title)
    return save_figure(fig, path)


def bar_with_ci(
    labels: Sequence[str],
    means: Sequence[float],
    los: Sequence[float],
    his: Sequence[float],
    path: str | Path,
    title: str,
    *,
    ylabel: str = "",
    points: Sequence[Sequence[float]] | None = None,
    level: tuple[float, str] | None = None,
) -> Path:
    """Bars at `means` with error bars from `los` to `his` (absolute limits, not offsets); with
    `points`, each bar's individual values (e.g. one per seed) as dots over it; with `level`
    (value, label), a dotted horizontal line at that value (e.g. chance), named in a legend."""
    means_arr, los_arr, his_arr = (np.asarray(v, dtype=float) for v in (means, los, his))
    if not len(labels) == means_arr.size == los_arr.size == his_arr.size:
        raise DataError("bar_with_ci needs one label, mean, lo and hi per bar")
    if np.any(los_arr > means_arr) or np.any(his_arr < means_arr):
        raise DataError("every interval [lo, hi] must contain its mean")
    fig, ax = new_figure(size=(max(4.0, 0.8 * len(labels) + 2), 4.0))
    positions = np.arange(len(labels))
    yerr = np.vstack([means_arr - los_arr, his_arr - means_arr])
    ax.bar(positions, means_arr, yerr=yerr, capsize=4, color="#4C72B0", alpha=0.85)
    for x, values in zip(positions, points or []):
        ax.plot(np.full(len(values), x), values, "o", color="k", markersize=3, zorder=3)
    if level is not None:
        ax.axhline(level[0], color="k", linewidth=0.9, linestyle=":", label=level[1])
        ax.legend(fontsize=8)
    tilt = len(labels) > 4
    ax.set_xticks(positions, labels, rotation=30 if tilt else 0, ha="right" if tilt else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)
