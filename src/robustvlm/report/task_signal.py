"""The report of `robustvlm robustness task-signal`: one line per task-signal family, the lift
between lines at matched reference accuracy, and a plain answer to "does the VQA line sit above
the caption line?", as Markdown and self-contained HTML with the probit plots."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robustvlm.analysis.accuracy_on_the_line import LineFit, RobustnessFit
from robustvlm.analysis.task_signal import Lift
from robustvlm.config import TaskSignalConfig
from robustvlm.machine import write_results_json
from robustvlm.report.line_scatter import family_lines_scatter
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table, write_page
from robustvlm.report.tables import fmt


@dataclass(frozen=True)
class ShiftResult:
    """One (reference, shift) pair: each family's line, the lifts, every model against the
    probe line (`fit_robustness` with the probes as baseline)."""

    shift: str
    lines: dict[str, LineFit]
    lifts: list[Lift]
    against_probes: RobustnessFit

    def lift(self, family: str, baseline: str) -> Lift | None:
        """The lift of `family` over `baseline`; None when either has no line."""
        return next((x for x in self.lifts if x.family == family and x.baseline == baseline), None)


@dataclass(frozen=True)
class TaskSignalSummary:
    """A finished experiment: its settings, data sizes and per-shift results."""

    label: str
    config: TaskSignalConfig
    described: list[str]
    n_train_images: int
    n_questions: int
    results_csv: str
    shifts: dict[str, ShiftResult]
    seconds: float

    def to_dict(self) -> dict:
        """The results.json content (accuracies and lifts are fractions)."""
        return {
            "label": self.label, "seconds": self.seconds, "config": self.config.model_dump(mode="json"),
            "described_attributes": self.described, "n_train_images": self.n_train_images,
            "n_questions_per_style": self.n_questions, "results_csv": self.results_csv,
            "shifts": {
                s: {"lines": {f: line.to_dict() for f, line in r.lines.items()},
                    "lifts": [x.to_dict() for x in r.lifts],
                    "models": [m.to_dict() for m in r.against_probes.models]}
                for s, r in self.shifts.items()
            },
        }


NEAR_CHANCE = 0.05  # a family whose models all score within this of chance on a set carries no signal there


def chance_note(result: ShiftResult, family: str, chance: float) -> str:
    """"" or a warning that `family`'s models sit near chance on the reference or the shift."""
    models = [m.point for m in result.against_probes.models if m.point.family == family]
    sets = [name for name, accs in (("reference", [p.acc_ref for p in models]), ("shift", [p.acc_shift for p in models]))
            if max(accs) < chance + NEAR_CHANCE]
    return f"near chance on the {' and the '.join(sets)}" if sets else ""


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def lift_sentence(lift: Lift, reference: str, shift: str) -> str:
    """The plain reading of one lift."""
    where = (f"at matched `{reference}` accuracy {100 * lift.at_ref:.1f}%"
             + (" (an extrapolation of at least one line)" if lift.extrapolated else ""))
    ci = f"[{_points(lift.ci[0])}, {_points(lift.ci[1])}] points"
    if lift.verdict == "indistinguishable":
        return (f"On `{shift}`, {where}, the {lift.family} line and the {lift.baseline} line are not "
                f"distinguishable: {lift.family} minus {lift.baseline} is {_points(lift.lift)} points, and its "
                f"{lift.level:.0%} interval {ci} includes 0 ({100 * lift.share_above:.0f}% of resamples above).")
    return (f"On `{shift}`, {where}, the {lift.family} line sits {lift.verdict.upper()} the {lift.baseline} "
            f"line by {100 * abs(lift.lift):.1f} points ({lift.family} minus {lift.baseline}: {_points(lift.lift)}; "
            f"{lift.level:.0%} interval {ci}; {100 * lift.share_above:.0f}% of resamples above).")


def answer(result: ShiftResult, reference: str, chance: float) -> str:
    """The VQA-over-caption reading of one shift."""
    lift = result.lift("vqa", "caption")
    if lift is None:
        missing = [f for f in ("vqa", "caption") if f not in result.lines]
        return (f"On `{result.shift}`, no VQA-over-caption lift: {', '.join(missing)} has no line (its models "
                "share one reference accuracy).")
    notes = [f"{f}: {note}" for f in ("vqa", "caption") if (note := chance_note(result, f, chance))]
    caveat = (f" Caution: {'; '.join(notes)} (within {100 * NEAR_CHANCE:.0f} points of chance), so this line "
              "fits noise there." if notes else "")
    return lift_sentence(lift, reference, result.shift) + caveat


def _short(result: ShiftResult) -> str:
    lift = result.lift("vqa", "caption")
    if lift is None:
        return f"`{result.shift}`: no line to compare"
    verdict = lift.verdict if lift.verdict == "indistinguishable" else f"{lift.verdict} the caption line"
    return f"`{result.shift}`: VQA line {verdict}"


def _setup(summary: TaskSignalSummary) -> Paragraph:
    cfg = summary.config
    families = ", ".join(f"`{f}` ({share:.0%} VQA pairs)" for f, share in cfg.families.items())
    probes = f"{len(cfg.probe.n_train) * len(cfg.probe.seeds)}"
    return Paragraph(
        f"One base VLM (`{cfg.model.name}`) was pretrained generatively for {cfg.base_steps} steps on the "
        f"captions and questions of {summary.n_train_images} training images (held-in real MNIST digits drawn "
        f"as {', '.join(f'`{s}`' for s in cfg.train_styles)}); its vision tower is then frozen in every model. "
        f"Families: {families}; each trained as an embedding model (InfoNCE, temperature {cfg.embed.temperature}, "
        f"`{cfg.model.trainable}` parts trainable) for every seed in {cfg.seeds} and budget in {cfg.budgets} "
        f"steps of {cfg.train.batch_size} pairs, on the same images, with the same number of pairs per image. "
        f"Captions state the digit and the attributes {', '.join(f'`{a}`' for a in summary.described[1:]) or '(none)'}; "
        f"VQA pairs ask one of them each. Baseline: {probes} linear probes on the frozen image features "
        f"(training sizes {cfg.probe.n_train} x seeds {cfg.probe.seeds}). Every model answers "
        f"{summary.n_questions} {cfg.k_options}-way questions \"What digit is shown?\" per style about held-out "
        f"scans: `{cfg.reference}` (reference) and {', '.join(f'`{s}`' for s in cfg.shifts)} (shifts); "
        "embedding models by similarity (VQA-trained: image + question against the class name; caption-trained: "
        "the image alone against \"a handwritten <class>\"), probes by their class logits. Lines are least-squares "
        "fits in probit space, one per family; lifts are vertical distances between two lines at the reference "
        "accuracy where both families' models sit on average, with 95% bootstrap intervals that resample the "
        "models of each family and the questions of each set (shared by all models).")


def _line_table(summary: TaskSignalSummary) -> Table:
    rows = []
    chance = 1 / summary.config.k_options
    for shift, result in summary.shifts.items():
        for family, line in result.lines.items():
            accs = [m.point.acc_ref for m in result.against_probes.models if m.point.family == family]
            rows.append([shift, family, str(line.n), fmt(line.slope), fmt(line.intercept), fmt(line.r2),
                         f"{100 * min(accs):.0f}-{100 * max(accs):.0f}%", chance_note(result, family, chance)])
    return Table(["shift", "family", "models", "slope", "intercept", "r^2", "reference accuracy range", "note"], rows)


def _lift_table(summary: TaskSignalSummary) -> Table:
    rows = [[shift, x.family, x.baseline, f"{100 * x.at_ref:.1f}%", _points(x.lift),
             f"[{_points(x.ci[0])}, {_points(x.ci[1])}]", f"{100 * x.share_above:.0f}%",
             x.verdict + (" (extrapolated)" if x.extrapolated else "")]
            for shift, r in summary.shifts.items() for x in r.lifts]
    return Table(["shift", "family", "over", "at reference", "lift (points)", "95% CI", "resamples > 0", "reading"],
                 rows)


def _model_table(summary: TaskSignalSummary) -> Table:
    shifts = list(summary.shifts)
    first = summary.shifts[shifts[0]].against_probes.models
    by_shift = {s: {m.point.model: m for m in r.against_probes.models} for s, r in summary.shifts.items()}
    rows = [[m.point.model, m.point.family, fmt(100 * m.point.acc_ref, 1)]
            + [f"{100 * by_shift[s][m.point.model].point.acc_shift:.1f} "
               f"({100 * by_shift[s][m.point.model].effective_robustness:+.1f})" for s in shifts]
            for m in first]
    against = {s: "probes" if r.against_probes.baseline else "all models" for s, r in summary.shifts.items()}
    return Table(["model", "family", f"{summary.config.reference} %"]
                 + [f"{s} % (ER vs {against[s]})" for s in shifts], rows)


def report_blocks(summary: TaskSignalSummary) -> list[Block]:
    """The page: answer first, then setup, tables and plots."""
    cfg = summary.config
    blocks: list[Block] = [
        Heading("Task signal and the robustness line" + (f" ({summary.label})" if summary.label else ""), 1),
        Heading("Answer"),
        *[Paragraph(answer(r, cfg.reference, 1 / cfg.k_options)) for r in summary.shifts.values()],
        Paragraph("So, on our data: " + "; ".join(_short(r) for r in summary.shifts.values())
                  + ". A line counts as above or below only when its 95% interval excludes zero."),
        Heading("Setup"),
        _setup(summary),
        Heading("Lines (probit axes)"),
        _line_table(summary),
        Heading("Lifts at matched reference accuracy"),
        _lift_table(summary),
    ]
    for shift in summary.shifts:
        blocks.append(Image(f"plots/{shift}.png", f"{shift} vs {cfg.reference}"))
    blocks += [
        Heading("Models"),
        Paragraph("Accuracy on each style in percent; in brackets the effective robustness against the probe "
                  "line in points (shifted accuracy minus the probe line's prediction at the model's reference "
                  "accuracy)."),
        _model_table(summary),
        Heading("What these numbers are"),
        Paragraph("Tiny randomly initialised models trained for seconds to minutes on CPU, each accuracy measured "
                  f"on {summary.n_questions} questions: wide per-model intervals (the error bars), and lines fitted "
                  "through a handful of models each. The base's vision tower saw only its short pretraining on the "
                  "training images; a real study freezes a web-pretrained tower (SigLIP, CLIP) and trains on real "
                  "caption and VQA data (README: running it on a GPU machine)."),
        Paragraph(f"Wall time of this invocation: {summary.seconds:.0f} s (work reused from an earlier run not counted)."),
    ]
    return blocks


def write_report(summary: TaskSignalSummary, out_dir: str | Path) -> tuple[Path, Path]:
    """plots/<shift>.png, results.json, report.md and report.html in `out_dir`."""
    out = Path(out_dir)
    cfg = summary.config
    for shift, result in summary.shifts.items():
        family_lines_scatter(result.against_probes.models, result.lines, out / "plots" / f"{shift}.png",
                             title=f"{shift} vs {cfg.reference}: one line per task signal (probit axes)",
                             xlabel=f"{cfg.reference} accuracy", ylabel=f"{shift} accuracy")
    write_results_json(out, summary.to_dict())
    return write_page(report_blocks(summary), out, title="robustvlm: task signal and the robustness line")
