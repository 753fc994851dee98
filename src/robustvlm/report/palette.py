"""One style per group for every scatter plot: a colour and a marker, distinct for every group and
the same for a group in every plot drawn from one table.

Colours are matplotlib's "tab20" taken as its ten tab10 colours first, then their ten light shades
(20 colours); markers cycle through twelve shapes. Groups are styled in sorted order of their
names, group i getting colour i mod 20 and marker i mod 12, so that no two of up to `MAX_GROUPS`
groups look alike and a group keeps its style in every plot given the same set of groups (pass
the whole table's groups, not one plot's). The fitted lines of the scatter plots are drawn in
black and grey, which no group gets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from matplotlib import colormaps
from matplotlib.colors import to_hex

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
_TAB20 = [to_hex(c) for c in colormaps["tab20"].colors]  # type: ignore[attr-defined]
COLOURS = tuple(_TAB20[0::2] + _TAB20[1::2])
MAX_GROUPS = math.lcm(len(COLOURS), len(MARKERS))


@dataclass(frozen=True)
class Style:
    """How one group is drawn: a colour (hex) and a matplotlib marker."""

    colour: str
    marker: str


def group_styles(groups: Iterable[str]) -> dict[str, Style]:
    """{group: its style} for the distinct `groups`, in sorted order (module doc). ValueError past
    `MAX_GROUPS`."""
    names = sorted(set(groups))
    if len(names) > MAX_GROUPS:
        raise ValueError(f"{len(names)} groups: a scatter plot keeps at most {MAX_GROUPS} distinct")
    return {name: Style(COLOURS[i % len(COLOURS)], MARKERS[i % len(MARKERS)]) for i, name in enumerate(names)}
