"""Every scatter plot keeps every group distinct: one (colour, marker) per group, past ten groups too."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_hex

from robustvlm.analysis.accuracy_on_the_line import ModelPoint, fit_robustness
from robustvlm.report.line_scatter import family_lines_scatter, scatter
from robustvlm.report.palette import MAX_GROUPS, group_styles


@pytest.mark.parametrize("n", [1, 10, 11, 25, MAX_GROUPS])
def test_no_two_groups_share_a_style(n):
    styles = group_styles(f"g{i}" for i in range(n))
    assert len(styles) == n
    assert len({(s.colour, s.marker) for s in styles.values()}) == n


def test_kept_colours_go_to_no_group():
    styles = group_styles((f"g{i}" for i in range(30)), skip_colours=1)
    assert to_hex("C0") not in {s.colour for s in styles.values()}
    assert len({(s.colour, s.marker) for s in styles.values()}) == 30


def test_the_first_ten_groups_are_tab10_circles_and_too_many_groups_is_refused():
    styles = list(group_styles(f"g{i}" for i in range(12)).values())
    assert [s.colour for s in styles[:10]] == [to_hex(c) for c in plt.get_cmap("tab10").colors]
    assert {s.marker for s in styles[:10]} == {"o"} and styles[10].marker != "o"
    with pytest.raises(ValueError, match="distinct"):
        group_styles(f"g{i}" for i in range(MAX_GROUPS + 1))


def _twelve_families() -> list[ModelPoint]:
    rng = np.random.default_rng(0)
    return [ModelPoint(f"m{f}{i}", f"family {f}", float(a), float(a) - 0.1, 1000, 1000)
            for f in range(12) for i, a in enumerate(rng.uniform(0.4, 0.8, 2))]


def _drawn_styles(monkeypatch) -> list[tuple[str, str]]:
    """Patch Axes.errorbar to record each family's (colour, marker)."""
    seen: list[tuple[str, str]] = []
    original = plt.Axes.errorbar

    def record(self, *args, **kwargs):
        seen.append((to_hex(kwargs["color"]), kwargs["fmt"]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(plt.Axes, "errorbar", record)
    return seen


def test_both_line_scatters_draw_twelve_families_in_twelve_distinct_styles(tmp_path, monkeypatch):
    points = _twelve_families()
    result = fit_robustness(points, ref="a", shift="b", n_boot=50)
    seen = _drawn_styles(monkeypatch)
    scatter(result.models, result.fit, result.band, tmp_path / "s.png", title="t", xlabel="x", ylabel="y",
            fit_label="fit")
    assert len(seen) == 12 and len(set(seen)) == 12
    assert to_hex("C0") not in {c for c, _ in seen}  # C0 is the fitted line's
    seen.clear()
    family_lines_scatter(result.models, {}, tmp_path / "f.png", title="t", xlabel="x", ylabel="y")
    assert len(seen) == 12 and len(set(seen)) == 12


def test_own_markers_gives_every_group_its_colour_and_marker():
    styles = list(group_styles((f"g{i}" for i in range(9)), skip_colours=1, own_markers=True).values())
    assert len({s.colour for s in styles}) == len({s.marker for s in styles}) == 9
    assert to_hex("C0") not in {s.colour for s in styles}
    with pytest.raises(ValueError, match="at most 9 distinct"):
        group_styles((f"g{i}" for i in range(10)), skip_colours=1, own_markers=True)
