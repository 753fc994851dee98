"""`robustvlm demo ladder`: the invariance ladder, the IRM paper's Colored MNIST on real images
through pixels, frozen vision towers and VLMs (`experiments.ladder.run`); with `zoo`, its VLM rungs
from pretrained zoo VLMs. Its plan and presets: `experiments.ladder.plan`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.experiments.base import Experiment, default_demo_folder
from robustvlm.experiments.ladder.plan import PRESETS, LadderPlan
from robustvlm.extras import require

if TYPE_CHECKING:
    from robustvlm.experiments.ladder.results import LadderResults

DEPENDS_ON = ("robustvlm.experiments.ladder.run", "robustvlm.experiments.ladder.vlm",
              "robustvlm.experiments.ladder.zero_shot", "robustvlm.experiments.ladder.readings",
              "robustvlm.experiments.ladder.plan", "robustvlm.experiments.ladder.rung",
              "robustvlm.experiments.ladder.results", "robustvlm.data.colored_mnist", "robustvlm.objectives",
              "robustvlm.training.answer_fit", "robustvlm.models.tiny")


def ladder_methods() -> tuple[str, ...]:
    """The methods the ladder trains (`experiments.ladder.run.ladder_methods`)."""
    from robustvlm.experiments.ladder.run import ladder_methods as methods

    return methods()


def run(plan: LadderPlan, out: Path) -> LadderResults:
    """Run `plan` (checked: `checked_plan`) into `out`."""
    require("data", "demo ladder (its real MNIST digits)")
    from robustvlm.experiments.ladder.run import checked_plan, run_ladder_demo

    return run_ladder_demo(out, checked_plan(plan))


EXPERIMENT = Experiment(
    name="ladder",
    example=("robustvlm zoo build --quick", "robustvlm demo ladder --zoo --quick --out demo_ladder_zoo_quick"),
    summary="the whole invariance ladder: the IRM paper's Colored MNIST on real images, through pixels, frozen "
    "vision towers and VLMs (--zoo: its VLM rungs from a pretrained zoo VLM)",
    plan=LadderPlan,
    presets=PRESETS,
    run=run,
    out=default_demo_folder("ladder"),
    depends_on=DEPENDS_ON,
    methods=ladder_methods,
)

__all__ = ["DEPENDS_ON", "EXPERIMENT", "ladder_methods", "run"]
