"""The linear unit tests report: report.md (PNG links) and a self-contained report.html.

Both pages come from one list of blocks (`report.page`'s Heading / Paragraph / Table / Image
and its Markdown and HTML writers): the test-error table of our objectives beside the
published figures, a bar chart per example, the selected hyperparameters, Dynamic BIRM's
penalty weight over training, and how our protocol differs from the published one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from robustvlm.analysis.verdict import compare_all, seed_spread, verdict_sentences
from robustvlm.data.synth.linear_unit_tests import EXAMPLES
from robustvlm.experiments.invariance.results import InvarianceResults
from robustvlm.linear.protocol import INFERRED, ORACLE, Run, Selection, linear_methods, method_label
from robustvlm.linear.published import PUBLISHED_NAMES
from robustvlm.objectives import REGISTRY
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table, write_page
from robustvlm.report.plots import new_figure, plot_series, save_figure
from robustvlm.report.smoke import page_title, smoke_verdict

PUBLISHED_ONLY = ("ANDMask", "IGA")
"""Methods the authors ran that robustvlm does not implement (their published figures only)."""
REGRESSION = ("Example1", "Example1s")

Row = tuple[str, str | None, str | None]
"""A table row: (label, our method or None, the published method or None)."""
#: the report's title
TITLE = "Linear unit tests of invariance"


def rows() -> list[Row]:
    """The table's rows in order: every registered objective (by its registered label), the methods
    on EIIL's environments, the published-only methods, the oracle."""
    ours = [m for m in linear_methods() if m != ORACLE] + list(INFERRED)
    shown: list[Row] = [(method_label(m), m, PUBLISHED_NAMES.get(m)) for m in ours]
    shown += [(name, None, name) for name in PUBLISHED_ONLY]
    return shown + [(method_label(ORACLE), ORACLE, PUBLISHED_NAMES[ORACLE])]


def cell(entry: Selection | Mapping | None, digits: int) -> str:
    """'mean ± std' of one result (ours or a published {"mean", "std"}), '—' where there is none,
    'diverged' for NaN."""
    if entry is None:
        return "—"
    mean, std = (entry["mean"], entry["std"]) if isinstance(entry, Mapping) else (entry.mean, entry.std)
    if not np.isfinite(mean):
        return "diverged"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def digits(example: str) -> int:
    """Decimals of an example's error: 2 for mean squared error, 3 for 0-1 error."""
    return 2 if example in REGRESSION else 3


def error_table(summary: InvarianceResults) -> Table:
    """Rows: ours and published per method; columns: the six examples."""
    results, reference = summary.results, summary.reference
    table = []
    for label, ours, theirs in rows():
        if ours is not None and ours in summary.methods:
            table.append(
                [label, "ours"] + [cell(results[ex][ours], digits(ex)) for ex in EXAMPLES]
            )
        if theirs is not None and reference is not None:
            published = reference.results
            table.append(
                [label, "published"]
                + [cell(published[ex].get(theirs), digits(ex)) for ex in EXAMPLES]
            )
    return Table(["method", "source", *EXAMPLES], table)


def chart_rows(summary: InvarianceResults) -> list[Row]:
    """The rows the chart shows: (label, our method if it ran, published name if shown)."""
    shown = [(label, ours if ours in summary.methods else None, theirs if summary.reference is not None else None)
             for label, ours, theirs in rows()]
    return [row for row in shown if row[1] is not None or row[2] is not None]


def bar_chart(summary: InvarianceResults, path: Path) -> Path:
    """One panel per example: our test errors as bars (± std over seeds), published as diamonds."""
    results, reference = summary.results, summary.reference
    shown = chart_rows(summary)
    fig, axes = new_figure(2, 3, size=(13.0, 7.0))
    for ax, example in zip(np.ravel(axes), EXAMPLES):
        labelled = set()
        for i, (_, ours, theirs) in enumerate(shown):
            if ours is not None:
                selected = results[example][ours]
                ax.bar(i, selected.mean, yerr=selected.std, color="C0" if ours != ORACLE else "0.6",
                       capsize=3, label=None if "ours" in labelled else "ours")
                labelled.add("ours")
            entry = reference.results[example].get(theirs) if theirs is not None and reference is not None else None
            if entry is not None:
                ax.errorbar(i, entry["mean"], yerr=entry["std"], fmt="D", color="k", markersize=5,
                            capsize=3, label=None if "published" in labelled else "published")
                labelled.add("published")
        ax.set_xticks(np.arange(len(shown)), [label for label, _, _ in shown], rotation=45, ha="right", fontsize=8)
        ax.set_title(example, fontsize=10)
        ax.set_ylabel("test MSE" if example in REGRESSION else "test error (0-1)")
        ax.grid(axis="y", alpha=0.3)
    np.ravel(axes)[0].legend(fontsize=8)
    fig.suptitle("Linear unit tests: test error of the selected hyperparameters (lower is better)")
    return save_figure(fig, path)


def hparam_table(summary: InvarianceResults) -> Table:
    """The selected draw of every (example, method): Adam's lr, weight decay, method arguments."""
    table = []
    for example in EXAMPLES:
        for _, method, _ in rows():
            if method is None or method not in summary.methods:
                continue
            entry = summary.results[example][method]
            config = entry.config
            args = ", ".join(f"{k}={_short(v)}" for k, v in config["method_args"].items()) or "defaults"
            table.append([example, method_label(method), str(entry.draw), _short(config["lr"]),
                          _short(config["weight_decay"]), args, str(entry.diverged)])
    return Table(["example", "method", "draw", "lr", "weight decay", "method arguments",
                  "diverged runs"], table)


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def lambda_blocks(summary: InvarianceResults, runs: Mapping[tuple[str, str, int, int], Run], out_dir: Path) -> list[Block]:
    """Dynamic BIRM's lambda and R_inv over training (selected draw, first seed) and extremes."""
    if "dynamic_birm" not in summary.methods:
        return []
    traces = {}
    for example in EXAMPLES:
        draw = summary.results[example]["dynamic_birm"].draw
        run = runs.get((example, "dynamic_birm", draw, 0))
        if run is not None and run.trace:
            traces[example] = run.trace
    if not traces:
        return []
    plot_series(traces, ["lambda", "R_inv"], out_dir / "lambda.png",
                "Dynamic BIRM, selected draw, first seed", log_keys=["lambda", "R_inv"])
    table = [[ex, _short(v.largest_lambda), _short(v.smallest_r_inv)] for ex, v in summary.lambdas.items()]
    return [
        Heading("Dynamic BIRM's penalty weight"),
        Paragraph(
            "lambda and R_inv of the selected draw over training (first data seed), and over every "
            "draw and seed the largest lambda reached and the smallest R_inv while the penalty was on."
        ),
        Image("lambda.png", "Dynamic BIRM lambda and R_inv"),
        Table(["example", "largest lambda (all runs)", "smallest R_inv (all runs)"], table),
    ]


def protocol_paragraph(summary: InvarianceResults) -> Paragraph:
    """What was run, in numbers."""
    p = summary.protocol
    return Paragraph(
        f"{p.n_envs} environments, {p.dim_inv} invariant and {p.dim_spu} spurious "
        f"dimensions; {p.n_per_env} training rows and {p.n_eval_per_env} validation and "
        f"test rows per environment; {p.steps} full-batch Adam steps per model; {p.n_draws} "
        f"hyperparameter draws (draw 0 = defaults) x {p.n_seeds} data seeds per example and "
        f"method; selection on the training environments' validation error; cells: test error of "
        f"the selected draw, mean ± std over data seeds, averaged over the test environments "
        f"(mean squared error for Example1/1s, 0-1 error otherwise). Budget {summary.budget!r}; "
        f"wall time {summary.seconds:.0f} s, launcher {_launcher_words(summary.launcher)}."
    )


def _launcher_words(launcher: Mapping) -> str:
    if launcher["kind"] == "local":
        return f"local, {launcher['workers'] or 1} process(es)"
    return str(launcher["kind"])


def reference_paragraph(summary: InvarianceResults) -> Paragraph:
    """Where the published figures come from and how they average, or why none are shown."""
    p, reference = summary.protocol, summary.reference
    if reference is None:
        return Paragraph(
            f"No published row for this setting ({p.n_envs} environments, {p.dim_inv} invariant and "
            f"{p.dim_spu} spurious dimensions): the authors published {summary.published_settings}."
        )
    skipped = ""
    if reference.not_comparable:
        skipped = (f" Their {' and '.join(reference.not_comparable)} figures at this setting used a test split "
                   "that shuffled the wrong columns (a bug they fixed later): not comparable with ours.")
    return Paragraph(
        f"Published: {reference.paper}; {reference.source} (the row for {p.n_envs} environments, "
        f"{p.dim_spu} spurious dimensions; they published {summary.published_settings}). Both tables "
        "average the test error over all test environments and give the standard deviation over data "
        "seeds averaged over the environments, as the authors' collect_results.py does (from 4 "
        "environments on, Example1's later environments have larger scales and dominate its average). "
        "They ran 20 hyperparameter draws x 50 data seeds, 10,000 full-batch Adam steps and 10,000 rows "
        "per environment and split, with the same search ranges and selection rule (`--budget paper`). "
        f"{' and '.join(PUBLISHED_ONLY)} are not implemented here; {_not_in_paper()} were not in the "
        "paper." + skipped
    )


def _not_in_paper() -> str:
    """Our objectives that the authors did not run, as the report names them ("V-REx, GroupDRO and BIRM")."""
    labels = [cls.label for name, cls in REGISTRY.items() if name not in PUBLISHED_NAMES]
    return ", ".join(labels[:-1]) + " and " + labels[-1] if len(labels) > 1 else "".join(labels)


def spread_table(summary: InvarianceResults) -> Table:
    """Per example, ERM / IRMv1 / Oracle against the published spread: within one published
    standard deviation of the published mean or not, and how many standard deviations away."""
    verdicts = summary.within_spread or {}
    table = []
    for label, ours, theirs in rows():
        if ours is None or theirs is None or ours not in summary.methods:
            continue
        row = [label]
        for example in EXAMPLES:
            verdict = verdicts[example].get(ours)
            if verdict is None or verdict.within is None:
                row.append("not comparable")
                continue
            away = "" if verdict.sds is None else f" ({verdict.sds:+.1f} sd)"
            row.append(("within" if verdict.within else "outside") + away)
        table.append(row)
    return Table(["method", *EXAMPLES], table)


def spread_grid_table(summaries: Mapping[str, InvarianceResults]) -> Table:
    """Several settings' ERM and IRMv1 (and Oracle where run) against the published row of each.

    Args:
        summaries: {name: a `demo invariance` results.json}; shown by number of environments,
            then of spurious dimensions.

    Cells: "ours (published mean ± std) in|out", "n.c." where the published figure used another
    test split; the last column counts the cells within the spread of those comparable.
    """
    table = []
    order = sorted(summaries.values(), key=lambda s: (s.protocol.n_envs, s.protocol.dim_spu))
    for summary in order:
        p, reference, verdicts = summary.protocol, summary.reference, summary.within_spread
        if reference is None or verdicts is None:
            continue
        setting = f"{p.n_envs} envs, {p.dim_spu} spurious"
        for label, ours, theirs in rows():
            if ours is None or theirs is None or ours not in summary.methods:
                continue
            row, inside, comparable = [setting, label], 0, 0
            for example in EXAMPLES:
                verdict, k = verdicts[example][ours], digits(example)
                published = reference.results[example][theirs]
                if verdict.within is None:
                    row.append("n.c.")
                    continue
                comparable += 1
                inside += verdict.within
                row.append(f"{summary.results[example][ours].mean:.{k}f} "
                           f"({published['mean']:.{k}f} ± {published['std']:.{k}f}) "
                           + ("in" if verdict.within else "out"))
            table.append(row + [f"{inside} of {comparable}"])
    return Table(["setting", "method", *EXAMPLES, "within"], table)


def inferred_envs_table(summary: InvarianceResults) -> Table | None:
    """Per example: the purity of EIIL's split against the given environments, and IRMv1 / Dynamic
    BIRM test error trained on the given environments and on EIIL's (None if no EIIL method ran)."""
    pairs = [(given, inferred) for inferred, given in INFERRED.items() if inferred in summary.methods]
    if not pairs:
        return None
    header = ["example", "EIIL purity (given envs)"]
    for given, _ in pairs:
        header += [f"{method_label(given)}, given envs", f"{method_label(given)}, EIIL envs"]
    table = []
    for example in EXAMPLES:
        row = [example, f"{100 * summary.purity[example]:.1f}%"]
        for given, inferred in pairs:
            row += [cell(summary.results[example].get(given), digits(example)),
                    cell(summary.results[example][inferred], digits(example))]
        table.append(row)
    return Table(header, table)


def short_of_irm(summary: InvarianceResults) -> Paragraph | None:
    """Where BIRM or Dynamic BIRM has a higher test error than IRMv1 (None if neither ran)."""
    results = summary.results
    methods = [m for m in ("birm", "dynamic_birm") if m in summary.methods]
    if "irm" not in summary.methods or not methods:
        return None
    lines = []
    for method in methods:
        worse = [ex for ex in EXAMPLES if not results[ex][method].mean <= results[ex]["irm"].mean]
        label = method_label(method)
        lines.append(f"{label} falls short of IRMv1 (higher mean test error) on "
                     f"{', '.join(worse)}." if worse else f"{label} is at or below IRMv1 on every example.")
    return Paragraph(" ".join(lines))


def verdict_blocks(summary: InvarianceResults) -> list[Block]:
    """The `Verdict` section: every method but the oracle against ERM per example, computed from the
    selected draws' per-seed test errors (`analysis.verdict`)."""
    scores = {
        method_label(method): {ex: dict(zip(summary.results[ex][method].seeds, summary.results[ex][method].per_seed))
                               for ex in EXAMPLES}
        for method in summary.methods
    }
    if summary.quick:
        return smoke_verdict(f"each of {', '.join(method_label(m) for m in summary.methods)} trained on every "
                             "example for every draw and seed, and the tables below were computed from its test errors")
    if "erm" not in summary.methods:
        return [Heading("Verdict"), Paragraph("ERM did not run: no method is compared with a baseline.")]
    comparisons = compare_all(scores, method_label("erm"), skip=[method_label(ORACLE)], higher_is_better=False)
    lines = verdict_sentences(
        comparisons, what="example", fmt=lambda v: f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}",
        metric="the test error averaged over the test environments (mean squared error on Example1/1s, "
               "0-1 error otherwise; lower is better)",
        selection="training-environment validation (per method, the hyperparameter draw with the smallest "
                  "validation error summed over the training environments, averaged over data seeds)")
    return [Heading("Verdict"), *(Paragraph(line) for line in lines)]


def our_table(summary: InvarianceResults, cell: Callable[[Selection, str], str]) -> Table:
    """Rows: our methods that ran; columns: the examples; `cell(selection, example)` fills a cell."""
    table = [[label, *(cell(summary.results[ex][ours], ex) for ex in EXAMPLES)]
             for label, ours, _ in rows() if ours is not None and ours in summary.methods]
    return Table(["method", *EXAMPLES], table)


def seed_table(summary: InvarianceResults) -> Table:
    """Per method and example, the selected draw's test error in each data seed, then mean ± sd over
    seeds (ddof 1) [95% interval resampling seeds]."""
    return our_table(summary, lambda entry, ex: seeds_cell(entry.per_seed, digits(ex)))


def seeds_cell(values: list[float], k: int) -> str:
    """"v1, v2, ...: mean ± sd [lo, hi]" (the spread and interval over seeds; the values alone for
    one seed; "diverged" when a seed diverged)."""
    if not values or not all(np.isfinite(values)):
        return "diverged"
    text = ", ".join(f"{v:.{k}f}" for v in values)
    spread = seed_spread(values)
    if spread.sd is None or spread.ci is None:
        return text
    return f"{text}: {spread.mean:.{k}f} ± {spread.sd:.{k}f} [{spread.ci[0]:.{k}f}, {spread.ci[1]:.{k}f}]"


def reading_blocks(summary: InvarianceResults) -> list[Block]:
    """What the table says, per example, from the measured numbers."""
    results, reference = summary.results, summary.reference
    lines = []
    for example in EXAMPLES:
        ours = results[example]
        k = digits(example)
        candidates = [m for m in ours if m != ORACLE and np.isfinite(ours[m].mean)]
        best = min(candidates, key=lambda m: ours[m].mean) if candidates else None
        anchors = [f"{method_label(m)} {ours[m].mean:.{k}f}" for m in ("erm", ORACLE) if m in ours]
        if best is not None:
            anchors.append(f"lowest without the oracle: {method_label(best)} {ours[best].mean:.{k}f}")
        line = f"{example}: " + "; ".join(anchors)
        lines.append(line + ".")
    blocks: list[Block] = [Heading("Reading"), Paragraph(" ".join(lines))]
    one = results["Example1"]
    if "irm" in one and "erm" in one:
        irm, erm = one["irm"], one["erm"]
        verdict = "beats" if irm.mean + irm.std < erm.mean - erm.std else "does not clearly beat"
        text = (f"Positive control (Example1, where the paper's IRMv1 beats ERM): our IRMv1 "
                f"{irm.mean:.2f} ± {irm.std:.2f} {verdict} ERM {erm.mean:.2f} ± {erm.std:.2f}")
        if reference is not None:
            published = reference.results["Example1"]
            text += (f" (published: IRMv1 {published['IRMv1']['mean']:.2f}, ERM {published['ERM']['mean']:.2f}, "
                     f"oracle {published['Oracle']['mean']:.2f})")
        blocks.append(Paragraph(text + "."))
    shortfall = short_of_irm(summary)
    if shortfall is not None:
        blocks.append(shortfall)
    return blocks


def inferred_blocks(summary: InvarianceResults) -> list[Block]:
    """The EIIL section, where an EIIL method ran."""
    table = inferred_envs_table(summary)
    if table is None:
        return []
    return [
        Heading("Environments inferred by EIIL"),
        Paragraph("Two environments inferred from a reference ERM model's per-row IRMv1 scale gradients "
                  "(EIIL, no environment labels; `linear.inferred`), then IRMv1 / Dynamic BIRM trained on them "
                  "with the same draws and selection. Purity: share of training rows in their inferred "
                  "environment's majority given environment (with 3 equal given environments, about 33-50% "
                  "is no alignment). Test error, mean ± std over data seeds; '—': not run."),
        table,
    ]


def worst_env_table(summary: InvarianceResults) -> Table:
    """Per method and example, the selected draw's error on its worst test environment (seed mean),
    beside the average over environments that the main table gives."""
    def worst(entry: Selection, ex: str) -> str:
        per_env = entry.per_env
        finite = [v for v in per_env if np.isfinite(v)]
        if not finite or len(finite) != len(per_env):
            return "diverged"
        return f"{max(finite):.{digits(ex)}f} / {np.mean(finite):.{digits(ex)}f}"

    return our_table(summary, worst)


def write_invariance_report(
    summary: InvarianceResults, runs: Mapping[tuple[str, str, int, int], Run], out_dir: str | Path
) -> tuple[Path, Path]:
    """Draw the figures and write report.md and report.html into `out_dir`.

    Args:
        summary: `run_invariance_demo`'s results.
        runs: {(example, method, draw, seed): Run} of every trained model.

    Returns:
        (report.md, report.html) paths.
    """
    out_dir = Path(out_dir)
    bar_chart(summary, out_dir / "invariance.png")
    spread: list[Block] = [
        Heading("Against the published spread"),
        Paragraph("Within: our mean lies within one published standard deviation (over their 50 data "
                  "seeds) of the published mean, give or take their rounding to 4 decimals (1e-4); in "
                  "brackets, (ours - published mean) / published std."),
        spread_table(summary),
    ] if summary.within_spread is not None else []
    blocks: list[Block] = [
        Heading(page_title(TITLE, summary.quick), 1),
        *verdict_blocks(summary),
        protocol_paragraph(summary),
        reference_paragraph(summary),
        Heading("Test error"),
        error_table(summary),
        *spread,
        Image("invariance.png", "test error per example"),
        Heading("Per data seed"),
        Paragraph("The selected draw's test error in each data seed, then mean ± sd over seeds [95% interval "
                  "resampling the seeds]; the verdict compares these. (The test-error table's ± is the authors' "
                  "convention: the sd over seeds of each test environment, averaged over the environments.)"),
        seed_table(summary),
        Heading("Worst test environment"),
        Paragraph("Test error of the selected draw on its worst test environment / averaged over the test "
                  "environments (seed means; the published table gives averages only)."),
        worst_env_table(summary),
        *reading_blocks(summary),
        *inferred_blocks(summary),
        *lambda_blocks(summary, runs, out_dir),
        Heading("Selected hyperparameters"),
        hparam_table(summary),
    ]
    return write_page(blocks, out_dir, title=page_title(TITLE, summary.quick))
