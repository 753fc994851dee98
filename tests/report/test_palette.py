"""Every scatter plot keeps every group distinct and the same from plot to plot (issue 51.6): one
(colour, marker) per group from a 20-colour palette, by the sorted order of the table's groups;
half-transparent points; one legend entry per group; probit tick labels that do not collide."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_hex, to_rgb

from robustvlm.analysis.accuracy_on_the_line import ModelPoint, fit_robustness, transform
from robustvlm.report.line_scatter import (
    LINE_COLOUR,
    POINT_ALPHA,
    family_lines_scatter,
    scatter,
    shifts_grid,
)
from robustvlm.report.palette import COLOURS, MAX_GROUPS, group_styles
from robustvlm.report.plots import PERCENT_TICKS, TICK_PRIORITY, percent_axis


@pytest.mark.parametrize("n", [1, 10, 12, 20, 25, MAX_GROUPS])
def test_no_two_groups_share_a_style(n):
    styles = group_styles(f"g{i}" for i in range(n))
    assert len(styles) == n
    assert len({(s.colour, s.marker) for s in styles.values()}) == n


def test_twenty_distinct_colours_none_the_lines_and_too_many_groups_refused():
    assert len(set(COLOURS)) == 20 and COLOURS[:10] == tuple(to_hex(c) for c in plt.get_cmap("tab10").colors)
    rgb = np.array([to_rgb(c) for c in COLOURS])
    nearest = min(np.abs(rgb[i] - rgb[j]).sum() for i in range(20) for j in range(i))
    assert nearest > 0.14  # every pair apart by more than 0.14 summed over R, G, B (tab20: 0.149)
    assert to_hex(LINE_COLOUR) not in COLOURS
    styles = group_styles(f"g{i:02d}" for i in range(20))
    assert len({s.colour for s in styles.values()}) == 20  # twenty groups: twenty colours, not markers alone
    with pytest.raises(ValueError, match="distinct"):
        group_styles(f"g{i}" for i in range(MAX_GROUPS + 1))


def test_a_group_keeps_its_style_whatever_order_the_rows_come_in():
    names = [f"source {c}" for c in "LKJIHGFEDCBA"]
    assert group_styles(names) == group_styles(sorted(names)) == group_styles(names * 3)


def _twelve_families() -> list[ModelPoint]:
    rng = np.random.default_rng(0)
    return [ModelPoint(f"m{f}{i}", f"family {f}", float(a), float(a) - 0.1, 1000, 1000)
            for f in range(12) for i, a in enumerate(rng.uniform(0.4, 0.8, 2))]


def _drawn_styles(monkeypatch) -> list[tuple[str, str, str, float]]:
    """Patch Axes.errorbar to record each drawn family's (label, colour, marker, alpha)."""
    seen: list[tuple[str, str, str, float]] = []
    original = plt.Axes.errorbar

    def record(self, *args, **kwargs):
        seen.append((kwargs["label"], to_hex(kwargs["color"]), kwargs["fmt"], kwargs["alpha"]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(plt.Axes, "errorbar", record)
    return seen


def test_every_plot_of_a_run_and_the_page_grid_give_a_group_one_colour(tmp_path, monkeypatch):
    points = _twelve_families()
    result = fit_robustness(points, ref="a", shift="b", n_boot=50)
    other = fit_robustness(points[4:], ref="a", shift="c", n_boot=50)  # a panel without two families
    seen = _drawn_styles(monkeypatch)
    scatter(result.models, result.fit, result.band, tmp_path / "s.png", title="t", xlabel="x", ylabel="y",
            fit_label="fit")
    in_scatter = {label: (c, m) for label, c, m, _ in seen}
    seen.clear()
    family_lines_scatter(result.models, {}, tmp_path / "f.png", title="t", xlabel="x", ylabel="y")
    in_groups = {label: (c, m) for label, c, m, _ in seen}
    seen.clear()
    shifts_grid({"b": result, "c": other}, tmp_path / "g.png", title="t")
    in_grid = {label: (c, m) for label, c, m, _ in seen}
    assert len(in_scatter) == 12 and len(set(in_scatter.values())) == 12
    assert in_scatter == in_groups == in_grid
    assert all(alpha == POINT_ALPHA < 1 for *_, alpha in seen)


def test_the_groups_plot_lists_each_group_once(tmp_path):
    points = _twelve_families()
    result = fit_robustness(points, ref="a", shift="b", n_boot=50)
    lines = {f"family {f}": result.fit for f in range(12)}
    captured = {}
    original = plt.Axes.legend

    def record(self, *args, **kwargs):
        captured["legend"] = original(self, *args, **kwargs)
        return captured["legend"]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plt.Axes, "legend", record)
        family_lines_scatter(result.models, lines, tmp_path / "f.png", title="t", xlabel="x", ylabel="y")
    texts = [t.get_text() for t in captured["legend"].get_texts()]
    assert len(texts) == 13 and texts[0] == "y = x"
    assert [t.split(":")[0] for t in texts[1:]] == sorted(f"family {f}" for f in range(12))


@pytest.mark.parametrize(("which", "limits"), [("x", (0.005, 0.92)), ("y", (0.001, 0.85)), ("x", (0.3, 0.8))])
def test_probit_tick_labels_keep_apart(which, limits):
    assert sorted(TICK_PRIORITY) == sorted(PERCENT_TICKS)
    fig, ax = plt.subplots()
    forward = lambda a: transform(a, "probit")  # noqa: E731
    percent_axis(ax, which, forward, limits)
    ticks = ax.get_xticks() if which == "x" else ax.get_yticks()
    span = np.ptp(forward(np.array(limits)))
    assert len(ticks) >= 3 and np.diff(np.sort(ticks)).min() >= (0.09 if which == "x" else 0.05) * span - 1e-12
    plt.close(fig)
