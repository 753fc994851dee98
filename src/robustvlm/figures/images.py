"""The pictures of the Results pages, drawn from the same results as their tables.

`python -m robustvlm.figures DOC NAME=RESULTS_DIR --images DIR` writes, beside the table of a
figure that has a picture (`figures.registry.IMAGES`: each experiment's own, drawn by the plotting
function of its report where it draws one: the ladder's bars, the reward matrices, the study's
ID/OOD bars and heatmap), that picture to `DIR/NAME.png` (a tag after ':' kept in the file name);
the page shows it (`../images/NAME.png` relative to docs/results/) next to its block. Figures
without a plotting function of their results are tables only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from robustvlm.figures.registry import IMAGES
from robustvlm.report.figure_name import FigureName

IMAGES_DIR = Path("docs") / "images"
"""Where `make figures` writes the pictures (relative to the repository root it runs in)."""


def image_name(figure: str) -> str:
    """The picture's file name of `figure` (`rm-seeds:cue70` -> `rm-seeds-cue70.png`)."""
    return FigureName.parse(figure).file_stem + ".png"


def draw_image(figure: str, results: Mapping, images_dir: Path = IMAGES_DIR) -> Path | None:
    """Draw the picture of `figure` from `results` into `images_dir`; None when it has none."""
    draw = IMAGES.get(FigureName.parse(figure).kind)
    if draw is None:
        return None
    images_dir.mkdir(parents=True, exist_ok=True)
    return draw(results, images_dir / image_name(figure))
