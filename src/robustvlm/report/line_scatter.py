"""The accuracy-on-the-line scatter: shifted vs reference accuracy on probit or logit axes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple

from robustvlm.analysis.accuracy_on_the_line import (
    LineBand,
    LineFit,
    ModelRobustness,
    RobustnessFit,
    Transform,
    inverse_transform,
    transform,
)
from robustvlm.errors import DataError
from robustvlm.report.palette import Style, group_styles
from robustvlm.report.plots import new_figure, percent_axis, save_figure

#: the fitted line and its band: black, a colour no group gets (`palette`)
LINE_COLOUR = "k"
#: opacity of the models' points and error bars (about 100 models overlap on open_clip's table)
POINT_ALPHA = 0.6


def _limits(values: np.ndarray, kind: Transform) -> tuple[float, float]:
    """Axis limits (fractions) spanning transformed `values` with a 10% margin."""
    z = transform(values, kind)
    pad = 0.1 * max(float(np.ptp(z)), 0.2)
    lo, hi = inverse_transform([z.min() - pad, z.max() + pad], kind)
    return float(lo), float(hi)


def scatter(
    models: Sequence[ModelRobustness],
    fit: LineFit,
    band: LineBand,
    path: str | Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    fit_label: str,
    reference_line: tuple[float, float, str] | None = None,
) -> Path:
    """Shifted vs reference accuracy on transformed axes with percentage tick labels.

    Draws y = x (dashed), the fitted line with its band, an optional second line
    (slope, intercept, label) in transformed units, and the models coloured by family with
    their confidence intervals as error bars.

    Args:
        models: the models to draw, coloured by family, with their accuracies' intervals.
    """
    fig, ax = new_figure(size=(6.5, 5.5))
    styles = group_styles(m.point.family for m in models)
    limits = _line_panel(ax, models, fit, band, styles, fit_label=fit_label, reference_line=reference_line)
    return _finish(fig, ax, fit.transform, limits, (xlabel, ylabel), title, path)


def _line_panel(
    ax: Axes,
    models: Sequence[ModelRobustness],
    fit: LineFit,
    band: LineBand,
    styles: Mapping[str, Style],
    *,
    fit_label: str,
    reference_line: tuple[float, float, str] | None = None,
) -> tuple[tuple[float, float], tuple[float, float]]:
    """One scatter panel in transformed units (`scatter`'s drawing, styles given by family);
    returns its (x, y) accuracy limits (fractions) for `percent_axis`."""
    kind = fit.transform
    acc_x = np.array([m.point.acc_ref for m in models])
    acc_y = np.array([m.point.acc_shift for m in models])
    xlim = _limits(np.concatenate([acc_x, band.grid]), kind)
    ylim = _limits(np.concatenate([acc_y, band.lo, band.hi]), kind)
    zx = transform(np.array(xlim), kind)
    ax.plot(zx, zx, linestyle="--", color="0.5", linewidth=1, label="y = x")
    zgrid = transform(band.grid, kind)
    ax.fill_between(
        zgrid,
        transform(band.lo, kind),
        transform(band.hi, kind),
        color=LINE_COLOUR,
        alpha=0.15,
        linewidth=0,
        label=f"{band.level:.0%} bootstrap band",
    )
    ax.plot(zgrid, fit.slope * zgrid + fit.intercept, color=LINE_COLOUR, linewidth=1.6, label=fit_label)
    if reference_line is not None:
        slope, intercept, label = reference_line
        ax.plot(zgrid, slope * zgrid + intercept, color="0.35", linestyle=":", linewidth=1.8, label=label)
    for family in styles:
        members = [m for m in models if m.point.family == family]
        if members:  # a family of another panel (shifts_grid) is not drawn here
            _plot_family(ax, members, kind, style=styles[family], label=family)
    return xlim, ylim


def shifts_grid(
    fits: Mapping[str, RobustnessFit], path: str | Path, *, title: str, ncols: int = 4
) -> Path:
    """One `scatter` panel per shift of `fits` ({shift: its fit}), in a grid of `ncols` columns:
    shifted (y) against reference (x) accuracy on the fits' transformed axes (probit or logit;
    tick labels in %), y = x dashed, each fit's line over its baseline family with the line's
    bootstrap band, and every model it places with its 95% intervals as error bars, one style per
    family (`palette.group_styles` over the families of every panel: the same in every panel and in
    `scatter` and `family_lines_scatter` of the same models); one legend for the figure."""
    if not fits:
        raise DataError("no shift to draw")
    ncols = min(ncols, len(fits))
    nrows = -(-len(fits) // ncols)
    fig, axes = new_figure(nrows, ncols, size=(3.2 * ncols, 3.0 * nrows + 0.8))
    axes = np.atleast_1d(axes).ravel()
    styles = group_styles(m.point.family for f in fits.values() for m in f.models)
    for ax, (shift, fit) in zip(axes, fits.items()):
        line = fit.fit
        limits = _line_panel(ax, fit.models, line, fit.band, styles, fit_label=f"line over {fit.baseline or 'all models'}")
        for which, lim, label in zip("xy", limits, (f"{fit.ref} accuracy", f"{shift} accuracy")):
            percent_axis(ax, which, partial(transform, kind=line.transform), lim, label=label)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.25)
        ax.set_title(f"{shift}: slope {line.slope:.2f}, $R^2$ {line.r2:.2f}", fontsize=9)
    for ax in axes[len(fits):]:
        ax.set_axis_off()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6), fontsize=8)
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, path)


def _finish(fig: Figure, ax: Axes, kind: Transform, limits: Sequence[tuple[float, float]], labels: Sequence[str],
            title: str, path: str | Path, legend: bool = True) -> Path:
    """Percentage ticks on both transformed axes, grid, title and (`legend`) the legend; save the PNG."""
    for which, lim, label in zip("xy", limits, labels):
        percent_axis(ax, which, lambda a: transform(a, kind), lim, label=label)
    ax.grid(alpha=0.25)
    ax.set_title(title, fontsize=11)
    if legend:
        ax.legend(fontsize=8, loc="upper left")
    return save_figure(fig, path)


def family_lines_scatter(
    models: Sequence[ModelRobustness],
    lines: Mapping[str, LineFit],
    path: str | Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
) -> Path:
    """Shifted vs reference accuracy on transformed axes, one style per family (`palette`): its
    models (with their confidence intervals) and its own fitted line, solid over the family's range
    of reference accuracies and dotted beyond it, under one legend entry per family; y = x dashed."""
    kind: Transform = next(iter(lines.values())).transform if lines else "probit"
    fig, ax = new_figure(size=(7.0, 5.8))
    acc_x = np.array([m.point.acc_ref for m in models])
    acc_y = np.array([m.point.acc_shift for m in models])
    xlim, ylim = _limits(acc_x, kind), _limits(acc_y, kind)
    zx = transform(np.array(xlim), kind)
    (diagonal,) = ax.plot(zx, zx, linestyle="--", color="0.5", linewidth=1)
    span = np.linspace(zx[0], zx[1], 50)
    handles: list[Any] = [diagonal]
    labels = ["y = x"]
    for family, style in group_styles(m.point.family for m in models).items():
        members = [m for m in models if m.point.family == family]
        points = _plot_family(ax, members, kind, style=style, label=family)
        handles.append(points)
        labels.append(family)
        if family in lines:
            fit = lines[family]
            own = transform([m.point.acc_ref for m in members], kind)
            inside = (span >= own.min()) & (span <= own.max())
            ax.plot(span, fit.slope * span + fit.intercept, color=style.colour, linewidth=0.9, linestyle=":")
            (solid,) = ax.plot(span[inside], fit.slope * span[inside] + fit.intercept, color=style.colour,
                               linewidth=1.8)
            handles[-1] = (solid, points)
            labels[-1] = f"{family}: slope {fit.slope:.2f}, intercept {fit.intercept:.2f}"
    ax.legend(handles, labels, handler_map={tuple: HandlerTuple(ndivide=None)}, fontsize=7.5, loc="upper left")
    return _finish(fig, ax, kind, (xlim, ylim), (xlabel, ylabel), title, path, legend=False)


def _plot_family(
    ax: Axes, members: Sequence[ModelRobustness], kind: Transform, *, style: Style, label: str
) -> ErrorbarContainer:
    """Points of one family with their confidence intervals as error bars, transformed; the points
    half transparent (POINT_ALPHA) so that crowded ones stay visible."""
    zx, zx_lo, zx_hi = (
        transform([m.point.acc_ref for m in members], kind),
        *(transform([m.ci_ref[j] for m in members], kind) for j in (0, 1)),
    )
    zy, zy_lo, zy_hi = (
        transform([m.point.acc_shift for m in members], kind),
        *(transform([m.ci_shift[j] for m in members], kind) for j in (0, 1)),
    )
    return ax.errorbar(
        zx,
        zy,
        xerr=[zx - zx_lo, zx_hi - zx],
        yerr=[zy - zy_lo, zy_hi - zy],
        fmt=style.marker,
        color=style.colour,
        alpha=POINT_ALPHA,
        markersize=5,
        markeredgewidth=0.4,
        markeredgecolor="white",
        elinewidth=0.7,
        capsize=0,
        label=label,
    )
