"""`demo invariance`'s typed result: what ran, the selections, and the published figures beside them.

`InvarianceResults.to_dict` writes results.json and `InvarianceResults.from_dict` reads it back
(the report and its figures read the attributes, never the JSON keys).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from robustvlm.linear.protocol import Protocol, Selection
from robustvlm.linear.published import PublishedRow


@dataclass(frozen=True)
class LambdaExtremes:
    """Over every traced Dynamic BIRM run of one example: the largest penalty weight lambda reached
    (not the objective's `lambda_max` cap) and the smallest R_inv while lambda > 0 (None if the
    penalty was never on)."""

    largest_lambda: float = 0.0
    smallest_r_inv: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        """The results.json entry."""
        return {"largest_lambda": self.largest_lambda, "R_inv_min": self.smallest_r_inv}

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> LambdaExtremes:
        """Read `to_dict`'s entry (a results.json written before the rename says `lambda_max`)."""
        largest = entry["largest_lambda"] if "largest_lambda" in entry else entry["lambda_max"]
        return cls(largest, entry["R_inv_min"])


@dataclass(frozen=True)
class SpreadVerdict:
    """One of our figures against the published spread: `within` one published std of the published
    mean (None: not comparable), and `sds` = (ours - mean) / std (None where std is 0 or n.c.)."""

    within: bool | None
    sds: float | None


@dataclass(frozen=True)
class InvarianceResults:
    """A finished `demo invariance`.

    Attributes:
        budget: the sweep's size ("quick", "default", "paper"); seconds: wall time.
        launcher: the job runner's settings (`JobRunnerConfig.model_dump()`).
        protocol: the sweep; methods: the methods trained, in `ALL_METHODS` order.
        results: {example: {method: Selection}}.
        lambdas: {example: LambdaExtremes} of the traced Dynamic BIRM runs.
        purity: {example: mean purity of EIIL's split over the data seeds}, where EIIL ran.
        reference: the published row of this setting, or None.
        within_spread: {example: {method: SpreadVerdict}} for the methods the authors ran, or None.
        published_settings: the settings the authors published, in words.
    """

    budget: str
    seconds: float
    launcher: dict[str, Any]
    protocol: Protocol
    methods: list[str]
    results: dict[str, dict[str, Selection]]
    lambdas: dict[str, LambdaExtremes] = field(default_factory=dict)
    purity: dict[str, float] = field(default_factory=dict)
    reference: PublishedRow | None = None
    within_spread: dict[str, dict[str, SpreadVerdict]] | None = None
    published_settings: str = ""

    @property
    def quick(self) -> bool:
        """A smoke test: too small for the figures to mean much."""
        return self.budget == "quick"

    def to_dict(self) -> dict[str, Any]:
        """The results.json content."""
        return {
            "budget": self.budget,
            "quick": self.quick,
            "seconds": self.seconds,
            "launcher": self.launcher,
            "protocol": asdict(self.protocol),
            "methods": list(self.methods),
            "results": {ex: {m: asdict(s) for m, s in by.items()} for ex, by in self.results.items()},
            "lambda": {ex: extremes.to_dict() for ex, extremes in self.lambdas.items()},
            "purity": self.purity,
            "reference": asdict(self.reference) if self.reference is not None else None,
            "within_spread": None if self.within_spread is None else {
                ex: {m: asdict(v) for m, v in by.items()} for ex, by in self.within_spread.items()},
            "published_settings": self.published_settings,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InvarianceResults:
        """Read `to_dict`'s content back (a results.json of `demo invariance`)."""
        reference = data["reference"]
        verdicts = data["within_spread"]
        return cls(
            budget=data["budget"],
            seconds=data["seconds"],
            launcher=data["launcher"],
            protocol=Protocol(**data["protocol"]),
            methods=list(data["methods"]),
            results={ex: {m: Selection(**s) for m, s in by.items()} for ex, by in data["results"].items()},
            lambdas={ex: LambdaExtremes.from_dict(v) for ex, v in data["lambda"].items()},
            purity=data["purity"],
            reference=None if reference is None else PublishedRow(
                **{**reference, "not_comparable": tuple(reference["not_comparable"])}),
            within_spread=None if verdicts is None else {
                ex: {m: SpreadVerdict(**v) for m, v in by.items()} for ex, by in verdicts.items()},
            published_settings=data["published_settings"],
        )
