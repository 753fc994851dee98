"""The pictures of the Results pages, drawn from the same results as their tables.

`python -m robustvlm.report.figures DOC NAME=RESULTS_DIR` writes, beside the table of a figure in
`IMAGES`, the picture the experiment's own report draws (the same plotting function) to
`IMAGES_DIR/NAME.png` (a tag after ':' kept in the file name); the page shows that picture
(`../images/NAME.png` relative to docs/results/) next to its block. Figures without a plotting function of their
results are tables only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from robustvlm.analysis.ladder_results import LadderResults
from robustvlm.linear.results import InvarianceResults
from robustvlm.report.invariance import bar_chart
from robustvlm.report.ladder import ladder_plot
from robustvlm.report.reward_report import matrix_heatmaps
from robustvlm.report.reward_results import RewardDemoSummary, RewardZooResults

IMAGES_DIR = Path("docs") / "images"
"""Where `make figures` writes the pictures (relative to the repository root it runs in)."""


def _ladder(results: Mapping, path: Path) -> Path:
    """The ladder's bars over all its rungs, as its report draws them."""
    return ladder_plot(LadderResults.from_dict(results).summary, path)


#: figure name -> draws its picture from the results its table is made from
IMAGES: dict[str, Callable[[Mapping, Path], Path]] = {
    "ladder": _ladder,
    "ladder-zoo": _ladder,
    "reward-matrix": lambda results, path: matrix_heatmaps(RewardDemoSummary.from_dict(results).matrix, path),
    "reward-zoo-matrix": lambda results, path: matrix_heatmaps(RewardZooResults.from_dict(results).matrix, path),
    "invariance": lambda results, path: bar_chart(InvarianceResults.from_dict(dict(results)), path),
}


def image_name(figure: str) -> str:
    """The picture's file name of `figure` (`rm-seeds:cue70` -> `rm-seeds-cue70.png`)."""
    return figure.replace(":", "-") + ".png"


def draw_image(figure: str, results: Mapping, images_dir: Path = IMAGES_DIR) -> Path | None:
    """Draw the picture of `figure` from `results` into `images_dir`; None when it has none."""
    draw = IMAGES.get(figure.split(":", 1)[0])
    if draw is None:
        return None
    images_dir.mkdir(parents=True, exist_ok=True)
    return draw(results, images_dir / image_name(figure))
