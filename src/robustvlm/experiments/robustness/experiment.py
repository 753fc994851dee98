"""`robustvlm demo robustness`: accuracy on the line, a family of tiny models on real digits and
their probit fits (`experiments.robustness.run`); with `zoo`, over the model zoo's pretrained
members on Fashion-MNIST scans (`experiments.robustness.zoo`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.experiments.base import Experiment, option, presets
from robustvlm.extras import require
from robustvlm.plan_fields import QUICK_HELP

if TYPE_CHECKING:
    from robustvlm.experiments.robustness.report import RobustnessDemoSummary
    from robustvlm.experiments.robustness.zoo_report import ZooRobustnessResults


@dataclass(frozen=True)
class RobustnessExperimentPlan:
    """The accuracy-on-the-line demo's options."""

    quick: bool = option(False, QUICK_HELP)
    zoo: bool = option(False, "over the model zoo's pretrained members (`zoo build` first; --quick: its quick "
                       "members) on Fashion-MNIST test-split scans, with the task-signal experiment on a zoo tower; "
                       "default --out demo_robustness_zoo[_quick]")
    members: tuple[str, ...] | None = option(None, "measure only these zoo members (comma-separated; a reduced zoo: "
                                             ">= 2 dual encoders and a VLM)", metavar="NAMES", with_zoo=True)


def run(plan: RobustnessExperimentPlan, out: Path) -> RobustnessDemoSummary | ZooRobustnessResults:
    """The family of tiny models, or the zoo (`zoo`), into `out`."""
    require("data", "demo robustness (its real MNIST digits)")
    if plan.zoo:
        from robustvlm.experiments.robustness.zoo import run_zoo_robustness

        return run_zoo_robustness(out, quick=plan.quick, members=list(plan.members) if plan.members else None)
    from robustvlm.experiments.robustness.run import run_robustness_demo

    return run_robustness_demo(out, quick=plan.quick)


def _out(plan: RobustnessExperimentPlan) -> str:
    return ("demo_robustness_zoo_quick" if plan.quick else "demo_robustness_zoo") if plan.zoo else "demo_robustness"


EXPERIMENT = Experiment(
    name="robustness",
    example=("robustvlm zoo build --quick", "robustvlm demo robustness --zoo --quick --out zr_quick"),
    summary="accuracy on the line: a family of tiny models, probit fits (--zoo: the model zoo's pretrained "
    "members on Fashion-MNIST)",
    plan=RobustnessExperimentPlan,
    presets=presets(RobustnessExperimentPlan, "quick", "zoo"),
    run=run,
    out=_out,
    depends_on=("robustvlm.experiments.robustness.run", "robustvlm.experiments.robustness.zoo",
                "robustvlm.experiments.robustness.verdict", "robustvlm.analysis.effective_robustness",
                "robustvlm.multiple_choice", "robustvlm.workflows.measure.task_signal"),
)
