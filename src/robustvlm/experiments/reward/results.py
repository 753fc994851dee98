"""The reward demos' results as typed classes, written to results.json (`to_dict`) and read back
through the same class (`from_dict`): `RewardDemoSummary` (`demo reward`) and `RewardZooResults`
(`demo reward --zoo`). The rungs are `reward.ladder_results`' classes, the matrices
`analysis.reward_matrix.MatrixResults`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from robustvlm.analysis.reward_matrix import MatrixResults
from robustvlm.reward.ladder_results import LinearRung, MatrixRung, ProxyWeights


@dataclass(frozen=True)
class RewardDemoPlan:
    """Sizes of one `demo reward` run."""

    n_per_env: int
    seeds: tuple[int, ...]
    policy_steps: int
    rm_steps: int
    test_per_env: int
    bon_prompts: int
    k: int
    jobs: int
    frozen_steps: int


@dataclass
class BonResult:
    """One reward model's Best-of-N: the gold curve (rows {"n", "mean", "n_prompts"}, mean over
    seeds) and the spread over seeds at N = K and N = 1 (`analysis.reward.seed_spread`)."""

    curve: list[dict[str, Any]]
    at_k: dict[str, Any]
    at_1: dict[str, Any]


@dataclass
class RewardDemoSummary:
    """What `demo reward` measured (results.json): the full models' matrix and its shortcut-aware
    minus standard comparison (`compare_labels`), Best-of-N per compared loss, and the ladder's
    rungs (linear, frozen backbone, and the full models' logged SFC weights)."""

    quick: bool
    seconds: float
    plan: RewardDemoPlan
    matrix: MatrixResults
    comparison: dict[str, dict[str, Any] | None]
    bon: dict[str, BonResult]
    linear: LinearRung
    frozen: MatrixRung
    full_proxy: ProxyWeights

    @property
    def full(self) -> MatrixRung:
        """Rung 3: the matrix's full models and their logged SFC weights."""
        return MatrixRung(self.matrix, self.full_proxy)

    def to_dict(self) -> dict[str, Any]:
        return {"quick": self.quick, "seconds": self.seconds, "plan": asdict(self.plan),
                "matrix": self.matrix.to_dict(), "comparison": self.comparison,
                "bon": {label: asdict(b) for label, b in self.bon.items()}, "linear": self.linear.to_dict(),
                "frozen": self.frozen.to_dict(), "full_proxy": self.full_proxy.to_dict()}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RewardDemoSummary:
        return cls(quick=raw["quick"], seconds=raw["seconds"],
                   plan=RewardDemoPlan(**{**raw["plan"], "seeds": tuple(raw["plan"]["seeds"])}),
                   matrix=MatrixResults.from_dict(raw["matrix"]), comparison=dict(raw["comparison"]),
                   bon={label: BonResult(**b) for label, b in raw["bon"].items()},
                   linear=LinearRung.from_dict(raw["linear"]), frozen=MatrixRung.from_dict(raw["frozen"]),
                   full_proxy=ProxyWeights.from_dict(raw["full_proxy"]))


@dataclass(frozen=True)
class RewardZooPlan:
    """Sizes of one `demo reward --zoo` run: the zoo member, pairs per environment, seeds,
    reward-model steps, test pairs per environment, parallel runs, rung 2's steps, rung 1's pairs
    and steps."""

    member: str
    n_per_env: int
    seeds: tuple[int, ...]
    rm_steps: int
    test_per_env: int
    jobs: int
    frozen_steps: int
    linear_n: int
    linear_steps: int


@dataclass
class RewardZooResults:
    """What `demo reward --zoo` measured (results.json): the full models' matrix and comparison,
    the three rungs as in `RewardDemoSummary`, and `steps`: the SFC weights per step on the
    cue-failing and cue-agreeing pairs (`analysis.sfc_steps.sfc_steps` rows, window 1), pooled over
    every shortcut-aware run ("all") and per seed ("seed-N")."""

    quick: bool
    seconds: float
    plan: RewardZooPlan
    matrix: MatrixResults
    comparison: dict[str, dict[str, Any] | None]
    linear: LinearRung
    frozen: MatrixRung
    full_proxy: ProxyWeights
    steps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def full(self) -> MatrixRung:
        return MatrixRung(self.matrix, self.full_proxy)

    def to_dict(self) -> dict[str, Any]:
        return {"quick": self.quick, "seconds": self.seconds, "plan": asdict(self.plan),
                "matrix": self.matrix.to_dict(), "comparison": self.comparison, "linear": self.linear.to_dict(),
                "frozen": self.frozen.to_dict(), "full_proxy": self.full_proxy.to_dict(), "steps": self.steps}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RewardZooResults:
        return cls(quick=raw["quick"], seconds=raw["seconds"],
                   plan=RewardZooPlan(**{**raw["plan"], "seeds": tuple(raw["plan"]["seeds"])}),
                   matrix=MatrixResults.from_dict(raw["matrix"]), comparison=dict(raw["comparison"]),
                   linear=LinearRung.from_dict(raw["linear"]), frozen=MatrixRung.from_dict(raw["frozen"]),
                   full_proxy=ProxyWeights.from_dict(raw["full_proxy"]), steps=dict(raw["steps"]))
