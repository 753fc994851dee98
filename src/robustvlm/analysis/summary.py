"""An evaluation's summary: per-environment means and the in-domain / out-of-domain macro means.

Rows are prediction rows {"id", "env", "ood", "scores": {metric: value | None}}; a None score
(e.g. a sample the judges could not decide) is left out of that metric's means. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EnvMetrics:
    """One environment: its row count, whether it is held out, and metric -> mean score."""

    n: int
    ood: bool
    scores: dict[str, float]


@dataclass(frozen=True)
class EvalMetrics:
    """What metrics.json holds: scores on the 0-1 scale.

    Attributes:
        n: rows evaluated.
        per_env: environment -> EnvMetrics (sorted by name).
        id, ood: metric -> mean over the in-domain / out-of-domain environments of their means
            (None when no environment of that kind scored the metric).
        counts: metric -> extra counts it reports (CEE: undecided samples), written as
            `<metric>_counts`.
    """

    n: int
    per_env: dict[str, EnvMetrics]
    id: dict[str, float | None]
    ood: dict[str, float | None]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "scale": "0-1",
            "per_env": {e: {"n": v.n, "ood": v.ood, **v.scores} for e, v in self.per_env.items()},
            "id": self.id,
            "ood": self.ood,
            **{f"{name}_counts": c for name, c in self.counts.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalMetrics:
        """Read back what `to_dict` wrote."""
        per_env = {
            env: EnvMetrics(v["n"], v["ood"], {k: x for k, x in v.items() if k not in ("n", "ood")})
            for env, v in data["per_env"].items()
        }
        counts = {k[: -len("_counts")]: v for k, v in data.items() if k.endswith("_counts")}
        return cls(data["n"], per_env, dict(data["id"]), dict(data["ood"]), counts)


def summarize(
    rows: Sequence[Mapping[str, Any]],
    metric_names: Sequence[str],
    counts: Mapping[str, dict[str, int]] | None = None,
) -> EvalMetrics:
    """Per-environment means and the ID / OOD macro means of each metric over `rows`."""
    sums: dict[str, dict[str, list[float]]] = {}
    info: dict[str, tuple[int, bool]] = {}
    for row in rows:
        n, _ = info.get(row["env"], (0, bool(row["ood"])))
        info[row["env"]] = (n + 1, bool(row["ood"]))
        env_sums = sums.setdefault(row["env"], {})
        for m in metric_names:
            if row["scores"].get(m) is not None:
                env_sums.setdefault(m, []).append(row["scores"][m])
    per_env = {
        env: EnvMetrics(n, ood, {m: sum(v) / len(v) for m, v in sums[env].items()})
        for env, (n, ood) in sorted(info.items())
    }

    def macro(ood: bool) -> dict[str, float | None]:
        envs = [e for e in per_env.values() if e.ood == ood]
        return {
            m: (sum(v) / len(v) if (v := [e.scores[m] for e in envs if m in e.scores]) else None)
            for m in metric_names
        }

    return EvalMetrics(len(rows), per_env, macro(False), macro(True), dict(counts or {}))
