"""The reward ladder's results as typed classes: what each rung measured, serialised to the
results.json layout the demos have always written (`to_dict`) and read back through the same
class (`from_dict`), so that reports read attributes, not string keys.

- `LinearRung` (rung 1, `experiments.reward.linear_rung`): per loss the per-seed image share, training and
  o.o.d. accuracy and SFD (`LinearLoss`), and the text-only proxy's accuracies and SFC weights
  (`LinearProxy`);
- `MatrixRung` (rung 2, `experiments.reward.frozen_rung`, and rung 3, the full models of an `rm matrix`): the
  generalization matrix (`analysis.reward_matrix.MatrixResults`) and where the SFC weights fell
  (`ProxyWeights`: per seed, and per run for rung 3's logs).

SFC distributions stay mappings with the keys of `analysis.reward.sfc_distribution`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from robustvlm.analysis.reward_matrix import MatrixResults

SfcDistribution = dict[str, float | None]
"""`analysis.reward.sfc_distribution`: mean, above_half, proxy_wrong, mean_proxy_wrong,
mean_proxy_right, weight_proxy_wrong (fractions)."""


@dataclass
class LinearLoss:
    """One loss of the linear rung, one value per seed (fractions; `sfd` None where undefined)."""

    image_share: list[float]
    train_accuracy: list[float]
    ood_accuracy: list[float]
    sfd: list[float | None]


@dataclass
class LinearProxy:
    """The linear rung's text-only proxy per seed: accuracy on its training and test pairs, and
    the SFC weights' distribution over the training pairs."""

    train_accuracy: list[float]
    ood_accuracy: list[float]
    sfc: list[SfcDistribution]


@dataclass
class LinearRung:
    """Rung 1: `losses` by name (standard, text_only, shortcut_aware) and the `proxy`."""

    losses: dict[str, LinearLoss]
    proxy: LinearProxy

    def to_dict(self) -> dict[str, Any]:
        """{loss: its fields, ..., "proxy": the proxy's fields} (results.json's "linear")."""
        return {**{name: asdict(loss) for name, loss in self.losses.items()}, "proxy": asdict(self.proxy)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> LinearRung:
        return cls({name: LinearLoss(**row) for name, row in raw.items() if name != "proxy"},
                   LinearProxy(**raw["proxy"]))


@dataclass
class RunWeights:
    """Where one shortcut-aware run's logged SFC weights fell (seed, training environment)."""

    seed: int
    env: str
    sfc: SfcDistribution


@dataclass
class ProxyWeights:
    """Per seed: the proxy's training accuracy and the SFC weights' distribution (pooled over the
    seed's runs); `runs`: the same per run where the rung has runs (rung 3), else None."""

    train_accuracy: list[float]
    sfc: list[SfcDistribution]
    runs: list[RunWeights] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"train_accuracy": self.train_accuracy, "sfc": self.sfc}
        if self.runs is not None:
            out["runs"] = [asdict(run) for run in self.runs]
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ProxyWeights:
        runs = raw.get("runs")
        return cls(list(raw["train_accuracy"]), list(raw["sfc"]),
                   None if runs is None else [RunWeights(**run) for run in runs])


@dataclass
class MatrixRung:
    """A rung trained per environment and tested on every one: its matrix and its SFC weights."""

    matrix: MatrixResults
    proxy: ProxyWeights

    def to_dict(self) -> dict[str, Any]:
        return {"matrix": self.matrix.to_dict(), "proxy": self.proxy.to_dict()}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> MatrixRung:
        return cls(MatrixResults.from_dict(raw["matrix"]), ProxyWeights.from_dict(raw["proxy"]))
