"""`robustvlm demo ladder`: the invariance ladder, the IRM paper's Colored MNIST on real images
through pixels, frozen vision towers and VLMs (`experiments.ladder.run`); with `zoo`, its VLM rungs
from pretrained zoo VLMs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.experiments.base import Experiment, default_demo_folder, option, presets
from robustvlm.extras import require

if TYPE_CHECKING:
    from robustvlm.analysis.ladder_results import LadderResults

QUICK_HELP = "a smaller run (a smoke test: its verdict says what it checked, no finding)"
ZOO_MEMBERS_HELP = "the zoo VLMs to start from, comma-separated (default idefics3-siglip-m; --quick: quick-idefics3)"
DEPENDS_ON = ("robustvlm.experiments.ladder.run", "robustvlm.experiments.ladder.vlm",
              "robustvlm.experiments.ladder.zero_shot", "robustvlm.analysis.ladder",
              "robustvlm.analysis.ladder_results", "robustvlm.data.colored_mnist", "robustvlm.objectives",
              "robustvlm.training.answer_fit", "robustvlm.models.tiny")


def ladder_methods() -> tuple[str, ...]:
    """The methods the ladder trains (`experiments.ladder.run.ladder_methods`)."""
    from robustvlm.experiments.ladder.run import ladder_methods as methods

    return methods()


@dataclass(frozen=True)
class LadderExperimentPlan:
    """The ladder demo's options (`run` turns them into a `LadderPlan`)."""

    quick: bool = option(False, QUICK_HELP)
    zoo: bool = option(False, "the ladder's VLM rungs (head, lora, full) from a pretrained zoo VLM instead of the "
                       "random tiny one (`zoo build` first); default --out demo_ladder_zoo[_quick]")
    members: tuple[str, ...] | None = option(None, ZOO_MEMBERS_HELP, metavar="NAMES", with_zoo=True)
    modes: tuple[str, ...] | None = option(None, "the VLM rungs to run, comma-separated of head, lora, full "
                                           "(default all three; --quick: head,full)", metavar="MODES", with_zoo=True)
    inferred_envs: bool = option(False, "also infer environments from data (EIIL, loss split, k-means) on the pixel "
                                 "rung and train IRMv1 / Dynamic BIRM on them", with_zoo=False)
    methods: tuple[str, ...] | None = option(None, "the methods to train, comma-separated", metavar="METHODS",
                                             shown=lambda: ",".join(ladder_methods()))
    seeds: tuple[int, ...] | None = option(None, "comma-separated model seeds (default 0,1,2; --quick: 0); a run's "
                                           "results do not depend on the other methods or seeds beside it",
                                           metavar="SEEDS", minimum=0)
    test_pictures: int | None = option(None, "pictures per test environment on the VLM rungs (default: as many as "
                                       "each training environment, 500; --quick 40): a larger shared test set "
                                       "for the paired verdicts, training data unchanged", metavar="N", minimum=10)


def run(plan: LadderExperimentPlan, out: Path) -> LadderResults:
    """The whole ladder (`FULL`, `QUICK`) or its zoo rungs (`zoo_plan`), subset to the plan's
    methods and seeds, into `out`."""
    require("data", "demo ladder (its real MNIST digits)")
    from robustvlm.experiments.ladder.run import (
        FULL,
        QUICK,
        ladder_subset,
        run_ladder_demo,
        zoo_plan,
    )

    if plan.zoo:
        base = zoo_plan(plan.members, quick=plan.quick, modes=plan.modes)
    else:
        base = QUICK if plan.quick else FULL
    if plan.test_pictures is not None:
        base = replace(base, vlm=replace(base.vlm, test_per_env=plan.test_pictures))
    return run_ladder_demo(out, quick=plan.quick, plan=ladder_subset(base, plan.methods, plan.seeds),
                           inferred_envs=plan.inferred_envs)


EXPERIMENT = Experiment(
    name="ladder",
    example=("robustvlm zoo build --quick", "robustvlm demo ladder --zoo --quick --out demo_ladder_zoo_quick"),
    summary="the whole invariance ladder: the IRM paper's Colored MNIST on real images, through pixels, frozen "
    "vision towers and VLMs (--zoo: its VLM rungs from a pretrained zoo VLM)",
    plan=LadderExperimentPlan,
    presets=presets(LadderExperimentPlan, "quick", "zoo"),
    run=run,
    out=default_demo_folder("ladder"),
    figures=("ladder", "ladder-vlm", "ladder-zoo", "ladder-zoo-oracle", "ladder-zoo-td", "ladder-zoo-shot",
             "ladder-zoo-seeds", "ladder-zoo-paired"),
    depends_on=DEPENDS_ON,
    methods=ladder_methods,
)
