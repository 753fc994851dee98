"""`robustvlm demo reward`: shortcut-aware reward models, generalization matrices, SFD and
Best-of-N from the demo's fine-tuned tiny policy (`experiments.reward.run`); with `zoo`, the reward
ladder from a pretrained zoo VLM (`experiments.reward.zoo`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.errors import ConfigError
from robustvlm.experiments.base import Experiment, default_demo_folder, option, presets
from robustvlm.plan_fields import QUICK_HELP

if TYPE_CHECKING:
    from robustvlm.experiments.reward.results import RewardDemoSummary, RewardZooResults


@dataclass(frozen=True)
class RewardExperimentPlan:
    """The reward demo's options."""

    quick: bool = option(False, QUICK_HELP)
    zoo: bool = option(False, "the reward ladder from zoo:idefics3-siglip-m (--quick: zoo:quick-idefics3) on "
                       "Fashion-MNIST preference pairs with the same text shortcuts, SFC weights per step "
                       "(`zoo build` first); default --out demo_reward_zoo[_quick]")
    members: tuple[str, ...] | None = option(None, "the one zoo VLM to start from", metavar="NAME", with_zoo=True)


def run(plan: RewardExperimentPlan, out: Path) -> RewardDemoSummary | RewardZooResults:
    """The reward demo, or its zoo variant (`zoo`), into `out`."""
    if plan.zoo:
        from robustvlm.experiments.reward.zoo import run_zoo_reward

        if plan.members and len(plan.members) > 1:
            raise ConfigError(f"demo reward --zoo: --members takes one zoo VLM, not {','.join(plan.members)!r}")
        return run_zoo_reward(out, quick=plan.quick, member=plan.members[0] if plan.members else None)
    from robustvlm.experiments.reward.run import run_reward_demo

    return run_reward_demo(out, quick=plan.quick)


EXPERIMENT = Experiment(
    name="reward",
    example=("robustvlm zoo build --quick", "robustvlm demo reward --zoo --quick"),
    summary="shortcut-aware reward models: generalization matrices, SFD, Best-of-N (--zoo: from a pretrained "
    "zoo VLM)",
    plan=RewardExperimentPlan,
    presets=presets(RewardExperimentPlan, "quick", "zoo"),
    run=run,
    out=default_demo_folder("reward"),
    depends_on=("robustvlm.experiments.reward.run", "robustvlm.experiments.reward.zoo",
                "robustvlm.experiments.reward.linear_rung", "robustvlm.experiments.reward.frozen_rung", "robustvlm.reward",
                "robustvlm.workflows.reward", "robustvlm.analysis.reward", "robustvlm.analysis.reward_matrix",
                "robustvlm.data.preferences"),
)
