"""One style per group for every scatter plot: a colour and a marker, distinct for every group.

Colours are matplotlib's ten "tab10" colours; past ten groups the marker changes with each round
of colours (group i: colour i mod 10, marker i div 10), so that no two groups of one plot look
alike, up to `MAX_GROUPS` (fewer where colours are kept for other elements of the plot).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from matplotlib import colormaps
from matplotlib.colors import to_hex

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
COLOURS = tuple(to_hex(c) for c in colormaps["tab10"].colors)  # type: ignore[attr-defined]
MAX_GROUPS = len(COLOURS) * len(MARKERS)


@dataclass(frozen=True)
class Style:
    """How one group is drawn: a colour (hex) and a matplotlib marker."""

    colour: str
    marker: str


def group_styles(groups: Iterable[str], *, skip_colours: int = 0, own_markers: bool = False) -> dict[str, Style]:
    """{group: its style} in the order given (duplicates once); `skip_colours` keeps the first
    colours for other elements of the plot (e.g. a fitted line in C0): no group gets them, the
    markers change after each round of the others. `own_markers` gives every group its own marker
    as well as its own colour (for few groups that must differ in black and white too). ValueError
    past the styles there are."""
    names = list(dict.fromkeys(groups))
    colours = COLOURS[skip_colours:]
    most = min(len(colours), len(MARKERS)) if own_markers else len(colours) * len(MARKERS)
    if len(names) > most:
        raise ValueError(f"{len(names)} groups: a scatter plot keeps at most {most} distinct")
    if own_markers:
        return {name: Style(colours[i], MARKERS[i]) for i, name in enumerate(names)}
    return {name: Style(colours[i % len(colours)], MARKERS[i // len(colours)]) for i, name in enumerate(names)}
