"""`robustvlm demo tasks`: the Dynamic BIRM paper's Table 1 in miniature, a study fine-tuning a tiny
VLM on the OCR tasks (`experiments.tasks.run`); with `zoo`, a pretrained zoo VLM on fashion-tasks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.experiments.base import Experiment, default_demo_folder, option, presets
from robustvlm.plan_fields import QUICK_HELP

if TYPE_CHECKING:
    from robustvlm.analysis.study import StudyResults


def study_methods() -> tuple[str, ...]:
    """Every registered objective that declares it applies to the study."""
    from robustvlm.objectives import TASKS, applicable_methods

    return applicable_methods(TASKS)


@dataclass(frozen=True)
class TasksExperimentPlan:
    """The Table-1 study's options."""

    quick: bool = option(False, QUICK_HELP)
    zoo: bool = option(False, "the study fine-tuning the pretrained zoo:llava-clip-m (--quick: zoo:quick-llava) on "
                       "the fashion-tasks benchmark, its zero-shot scores beside (`zoo build` first)")
    methods: tuple[str, ...] | None = option(None, "the study's methods by objective name, comma-separated",
                                             metavar="METHODS", shown=lambda: ",".join(study_methods()))
    overrides: tuple[str, ...] = option((), "key=value overrides of the study's base run config "
                                        "(configs/demo.yaml; configs/demo_zoo.yaml with --zoo)", positional=True)


def run(plan: TasksExperimentPlan, out: Path) -> StudyResults:
    """The packaged demo study into `out`."""
    from robustvlm.experiments.tasks.run import run_demo

    return run_demo(out, quick=plan.quick, overrides=list(plan.overrides), zoo=plan.zoo, methods=plan.methods)


EXPERIMENT = Experiment(
    name="tasks",
    example=("robustvlm demo tasks --out demo_tasks",),
    summary="the Dynamic BIRM paper's Table 1 in miniature: ERM, BIRM, Dynamic BIRM fine-tuning a tiny VLM on "
    "the OCR tasks, 3 seeds (--zoo: a pretrained zoo VLM on fashion-tasks)",
    plan=TasksExperimentPlan,
    presets=presets(TasksExperimentPlan, "quick", "zoo"),
    run=run,
    out=default_demo_folder("tasks"),
    depends_on=("robustvlm.experiments.tasks.run", "robustvlm.workflows.finetune", "robustvlm.training",
                "robustvlm.objectives", "robustvlm.evaluation", "robustvlm.analysis.study",
                "robustvlm.configs"),
    methods=study_methods,
)
