"""The pictures of the Results pages, drawn from the same results as their tables.

`python -m robustvlm.report.figures DOC NAME=RESULTS_DIR` writes, beside the table of a figure in
`IMAGES`, a picture drawn from the same results (by the plotting function of the experiment's own
report where it draws one: the ladder's bars, the reward matrices, the study's ID/OOD bars and
heatmap) to `IMAGES_DIR/NAME.png` (a tag after ':' kept in the file name); the page shows that
picture (`../images/NAME.png` relative to docs/results/) next to its block. Figures without a
plotting function of their results are tables only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from robustvlm.analysis.ladder_results import LadderResults
from robustvlm.analysis.study import StudyResults
from robustvlm.linear.results import InvarianceResults
from robustvlm.report.figure_name import FigureName
from robustvlm.report.icl_curves import defined_labels_bars, icl_curves
from robustvlm.report.invariance import bar_chart
from robustvlm.report.ladder import ladder_plot
from robustvlm.report.line_scatter import shifts_grid
from robustvlm.report.reward_report import matrix_heatmaps
from robustvlm.report.reward_results import RewardDemoSummary, RewardZooResults
from robustvlm.report.robustness_zoo import ZooRobustnessResults
from robustvlm.report.study_report import heatmap, id_ood_bars

IMAGES_DIR = Path("docs") / "images"
"""Where `make figures` writes the pictures (relative to the repository root it runs in)."""


def _ladder(results: Mapping, path: Path) -> Path:
    """The ladder's bars over all its rungs, as its report draws them."""
    return ladder_plot(LadderResults.from_dict(results).summary, path)


def _zoo_lines(results: Mapping, path: Path) -> Path:
    """`demo robustness --zoo`: per shift, every member against the dual encoders' probit line."""
    zoo = ZooRobustnessResults.from_dict(results)
    return shifts_grid({s: r.dual_line for s, r in zoo.shifts.items()}, path,
                       title=f"Shifted vs {zoo.reference} accuracy, probit axes: the dual encoders' line and every "
                             f"member ({zoo.n_questions} questions per style, chance {zoo.chance:.0%})")


#: figure name -> draws its picture from the results its table is made from (None: nothing to draw)
IMAGES: dict[str, Callable[[Mapping, Path], Path | None]] = {
    "ladder": _ladder,
    "ladder-zoo": _ladder,
    "reward-matrix": lambda results, path: matrix_heatmaps(RewardDemoSummary.from_dict(results).matrix, path),
    "reward-zoo-matrix": lambda results, path: matrix_heatmaps(RewardZooResults.from_dict(results).matrix, path),
    "invariance": lambda results, path: bar_chart(InvarianceResults.from_dict(dict(results)), path),
    "zoo-robustness-fits": _zoo_lines,
    "zoo-tasks": lambda results, path: id_ood_bars(StudyResults.from_dict(results), "exact", path),
    "zoo-tasks-envs": lambda results, path: heatmap(StudyResults.from_dict(results), "exact", path),
    "icl-domains": lambda results, path: icl_curves(results["rows"], path, title=f"{results['config']['model']}: "
                                                    "accuracy against demonstrations, per domain"),
    "icl-defined-labels": lambda results, path: defined_labels_bars(results, path),
}


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
