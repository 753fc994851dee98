"""The invariance ladder's results as typed classes (`experiments.ladder.run` writes them to
results.json with `LadderResults.to_dict`; the report and `make figures` read them back with
`LadderResults.from_dict`), its plan `experiments.ladder.plan.LadderPlan`.

Plain data here, so that the report (a lower layer than the workflows) reads the same classes
the demo writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from robustvlm.experiments.ladder.paired import LadderPaired, paired_from_dict, paired_to_dict
from robustvlm.experiments.ladder.plan import LadderPlan
from robustvlm.experiments.ladder.readings import Summary, summary_from_dict, summary_to_dict


@dataclass(frozen=True)
class SplitPurity:
    """An inferred split of the training rows: its environments' sizes and its purity (0-1)
    against the given environments and against whether the colour agrees with the label."""

    purity_given: float
    purity_colour: float
    sizes: list[int]


@dataclass(frozen=True)
class ZeroShot:
    """A pretrained model's accuracies (0-1) before fine-tuning (`ladder_zero_shot`):
    `ladder_noisy[kind][env]` on the ladder's question against the noisy labels,
    `ladder_clean[kind][env]` against the clean group, `ten_way[kind][env]` the ten-way answer's
    group against the clean group on the first `ten_way_pictures` pictures of each test
    environment; kind `coloured` or `grey`."""

    ladder_noisy: dict[str, dict[str, float]]
    ladder_clean: dict[str, dict[str, float]]
    ten_way: dict[str, dict[str, float]]
    ten_way_pictures: int


@dataclass(frozen=True)
class LadderResults:
    """A finished ladder: its setting, `summary` of the runs on the given environments,
    `inference` ({cell: {split: SplitPurity}}) and `inferred_summary` ({split: Summary}) when
    environments were inferred, `zero_shot` ({"source/model": ZeroShot}) for pretrained VLM
    rungs; `paired` ({reading: {cell: {method: {test env: PairedVerdict}}}}) each method against
    ERM on the same test pictures pooled over seeds (`experiments.ladder.paired`); `seconds` wall,
    `cpu_seconds` per part (`experiments.ladder.run.cpu_seconds`)."""

    quick: bool
    seconds: float
    cpu_seconds: dict[str, float]
    plan: LadderPlan
    paper: dict[str, float]
    method_hparams: dict[str, dict[str, Any]]
    vlm_method_hparams: dict[str, dict[str, Any]]
    train_envs: list[str]
    test_envs: list[str]
    summary: Summary
    inference: dict[str, dict[str, SplitPurity]] = field(default_factory=dict)
    inferred_summary: dict[str, Summary] = field(default_factory=dict)
    zero_shot: dict[str, ZeroShot] = field(default_factory=dict)
    paired: LadderPaired = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The results.json content (`zero_shot` only when there is one)."""
        d: dict[str, Any] = {
            "quick": self.quick, "seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "plan": self.plan.to_dict(),
            "paper": self.paper, "method_hparams": self.method_hparams, "vlm_method_hparams": self.vlm_method_hparams,
            "train_envs": self.train_envs, "test_envs": self.test_envs, "summary": summary_to_dict(self.summary),
            "inference": {cell: {name: asdict(p) for name, p in splits.items()}
                          for cell, splits in self.inference.items()},
            "inferred_summary": {envs: summary_to_dict(s) for envs, s in self.inferred_summary.items()},
            "paired": paired_to_dict(self.paired),
        }
        if self.zero_shot:
            d["zero_shot"] = {model: asdict(z) for model, z in self.zero_shot.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LadderResults:
        """The results a results.json holds."""
        return cls(
            quick=bool(d["quick"]), seconds=float(d["seconds"]), cpu_seconds=dict(d["cpu_seconds"]),
            plan=LadderPlan.from_dict({"quick": d["quick"], **d["plan"]}), paper=dict(d["paper"]), method_hparams=dict(d["method_hparams"]),
            vlm_method_hparams=dict(d["vlm_method_hparams"]), train_envs=list(d["train_envs"]),
            test_envs=list(d["test_envs"]), summary=summary_from_dict(d["summary"]),
            inference={cell: {name: SplitPurity(**p) for name, p in splits.items()}
                       for cell, splits in (d.get("inference") or {}).items()},
            inferred_summary={envs: summary_from_dict(s) for envs, s in (d.get("inferred_summary") or {}).items()},
            zero_shot={model: ZeroShot(**z) for model, z in (d.get("zero_shot") or {}).items()},
            paired=paired_from_dict(d.get("paired") or {}),
        )
