"""`robustvlm demo invariance`: the linear unit tests of invariance (Aubin et al., 2021) with every
objective, beside the paper's figures (`experiments.invariance.run`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.configs import resolve as config_file
from robustvlm.experiments.base import Experiment, option, presets

if TYPE_CHECKING:
    from robustvlm.experiments.invariance.results import InvarianceResults


def linear_methods() -> tuple[str, ...]:
    """Every registered objective that applies to the linear unit tests, then the oracle."""
    from robustvlm.linear.protocol import linear_methods as methods

    return methods()


@dataclass(frozen=True)
class InvarianceExperimentPlan:
    """The linear unit tests' options."""

    quick: bool = option(False, "a smoke test: --budget quick")
    n_envs: int = option(3, "environments", minimum=2)
    dim_inv: int = option(5, "invariant dimensions", minimum=1)
    dim_spu: int = option(5, "spurious dimensions", minimum=0)
    budget: str = option("default", "the sweep's size: quick (a smoke test, as --quick), default (a few CPU minutes), "
                         "paper (the authors' 20 draws x 50 data seeds, 10,000 rows and steps: for a cluster, with "
                         "--launcher)", choices=("quick", "default", "paper"))
    methods: tuple[str, ...] | None = option(
        None, "comma-separated methods to train (irm_eiil and dynamic_birm_eiil train on environments inferred "
        "by EIIL)", metavar="METHODS", shown=lambda: ",".join(linear_methods()))
    launcher: str | None = option(None, "the job runner's settings (a sweep's launcher: section: kind local / "
                                  "multi-gpu / slurm, workers, cluster, parameters); default 2 local worker processes",
                                  metavar="YAML", parse=config_file)


def run(plan: InvarianceExperimentPlan, out: Path) -> InvarianceResults:
    """The sweep at the plan's budget (`quick` wins over `budget`) into `out`."""
    from robustvlm.config import read_yaml_mapping, validate_config
    from robustvlm.experiments.invariance.run import run_invariance_demo
    from robustvlm.workflows.launchers import JobRunnerConfig

    launcher = None
    if plan.launcher:
        raw = read_yaml_mapping(plan.launcher, "launcher", "launcher settings")
        launcher = validate_config(raw, plan.launcher, JobRunnerConfig)
    return run_invariance_demo(out, n_envs=plan.n_envs, dim_inv=plan.dim_inv, dim_spu=plan.dim_spu,
                               budget="quick" if plan.quick else plan.budget, methods=plan.methods,
                               launcher=launcher)


EXPERIMENT = Experiment(
    name="invariance",
    reads_fashion_mnist=False,
    example=("robustvlm demo invariance --out figures/invariance/default",),
    summary="the linear unit tests of invariance: every objective on the six problems of Aubin et al. (2021), "
    "beside the paper's figures",
    plan=InvarianceExperimentPlan,
    presets={**presets(InvarianceExperimentPlan, "quick"), "paper": InvarianceExperimentPlan(budget="paper")},
    run=run,
    out=lambda plan: "demo_invariance",
    depends_on=("robustvlm.experiments.invariance.run", "robustvlm.linear", "robustvlm.objectives",
                "robustvlm.data.synth.linear_unit_tests"),
    methods=linear_methods,
)
