"""`robustvlm demo` (`make demo`): Colored MNIST on real images, ERM against the invariant
objectives on pixels and on a frozen VLM vision tower (the ladder's two clearest rungs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.experiments.base import Experiment, option, presets
from robustvlm.experiments.ladder.experiment import DEPENDS_ON
from robustvlm.extras import require
from robustvlm.plan_fields import QUICK_HELP
from robustvlm.timings import short

if TYPE_CHECKING:
    from robustvlm.experiments.ladder.results import LadderResults


@dataclass(frozen=True)
class DefaultExperimentPlan:
    """The default demo's options."""

    quick: bool = option(False, QUICK_HELP)


def run(plan: DefaultExperimentPlan, out: Path) -> LadderResults:
    """The ladder's `DEMO` plan (`DEMO_QUICK` with `quick`) into `out`."""
    if plan.quick:
        require("data", "demo --quick (its real MNIST digits)")
    from robustvlm.experiments.ladder.plan import DEMO, DEMO_QUICK
    from robustvlm.experiments.ladder.run import run_ladder_demo

    return run_ladder_demo(out, DEMO_QUICK if plan.quick else DEMO)


EXPERIMENT = Experiment(
    name="default",
    example=("robustvlm demo default --quick --out demo_out_quick",),
    summary="the default demo (also `robustvlm demo` alone): Colored MNIST on real images, ERM vs IRMv1 / "
    f"V-REx / BIRM / Dynamic BIRM on pixels and a frozen VLM vision tower, 3 seeds ({short('make-demo')} on 2 cores, "
    "as measured)",
    plan=DefaultExperimentPlan,
    presets=presets(DefaultExperimentPlan, "quick"),
    run=run,
    out=lambda plan: "demo_out_quick" if plan.quick else "demo_out",
    depends_on=DEPENDS_ON,
    methods=None,
)
"""Its methods are the ladder's (`ladder_methods`): the plan has no method option."""

__all__ = ["EXPERIMENT", "DefaultExperimentPlan", "run"]
