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
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table, write_page
from robustvlm.report.plots import new_figure, plot_series, save_figure

#: Table rows in order: (label, our method key or None, published key or None).
ROWS = [
    ("ERM", "erm", "ERM"),
    ("IRMv1", "irm", "IRMv1"),
    ("V-REx", "vrex", None),
    ("GroupDRO", "groupdro", None),
    ("BIRM", "birm", None),
    ("Dynamic BIRM", "dynamic_birm", None),
    ("IRMv1, EIIL environments", "irm_eiil", None),
    ("Dynamic BIRM, EIIL environments", "dynamic_birm_eiil", None),
    ("ANDMask", None, "ANDMask"),
    ("IGA", None, "IGA"),
    ("Oracle", "oracle", "Oracle"),
]
#: Our methods (results.json keys) and how the table names them.
LABELS = {ours: label for label, ours, _ in ROWS if ours}
REGRESSION = ("Example1", "Example1s")


def cell(entry: Mapping | None, digits: int) -> str:
    """'mean ± std' of one result, '—' where there is none, 'diverged' for NaN."""
    if entry is None:
        return "—"
    if not np.isfinite(entry["mean"]):
        return "diverged"
    return f"{entry['mean']:.{digits}f} ± {entry['std']:.{digits}f}"


def digits(example: str) -> int:
    """Decimals of an example's error: 2 for mean squared error, 3 for 0-1 error."""
    return 2 if example in REGRESSION else 3


def error_table(summary: Mapping) -> Table:
    """Rows: ours and published per method; columns: the six examples."""
    results, reference = summary["results"], summary["reference"]
    rows = []
    for label, ours, theirs in ROWS:
        if ours is not None and ours in summary["methods"]:
            rows.append(
                [label, "ours"] + [cell(results[ex][ours], digits(ex)) for ex in EXAMPLES]
            )
        if theirs is not None and reference is not None:
            published = reference["results"]
            rows.append(
                [label, "published"]
                + [cell(published[ex].get(theirs), digits(ex)) for ex in EXAMPLES]
            )
    return Table(["method", "source", *EXAMPLES], rows)


def chart_rows(summary: Mapping) -> list[tuple[str, str | None, str | None]]:
    """The rows of ROWS the chart shows: (label, our method if it ran, published name if shown)."""
    reference = summary["reference"]
    rows = [(label, ours if ours in summary["methods"] else None, theirs if reference is not None else None)
            for label, ours, theirs in ROWS]
    return [row for row in rows if row[1] is not None or row[2] is not None]


def bar_chart(summary: Mapping, path: Path) -> Path:
    """One panel per example: our test errors as bars (± std over seeds), published as diamonds."""
    results, reference = summary["results"], summary["reference"]
    shown = chart_rows(summary)
    fig, axes = new_figure(2, 3, size=(13.0, 7.0))
    for ax, example in zip(np.ravel(axes), EXAMPLES):
        labelled = set()
        for i, (_, ours, theirs) in enumerate(shown):
            if ours is not None:
                entry = results[example][ours]
                ax.bar(i, entry["mean"], yerr=entry["std"], color="C0" if ours != "oracle" else "0.6",
                       capsize=3, label=None if "ours" in labelled else "ours")
                labelled.add("ours")
            entry = reference["results"][example].get(theirs) if theirs is not None else None
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


def hparam_table(summary: Mapping) -> Table:
    """The selected draw of every (example, method): Adam's lr, weight decay, method arguments."""
    rows = []
    for example in EXAMPLES:
        for method, label in LABELS.items():
            if method not in summary["methods"]:
                continue
            entry = summary["results"][example][method]
            config = entry["config"]
            args = ", ".join(f"{k}={_short(v)}" for k, v in config["method_args"].items()) or "defaults"
            rows.append([example, label, str(entry["draw"]), _short(config["lr"]),
                         _short(config["weight_decay"]), args, str(entry["diverged"])])
    return Table(["example", "method", "draw", "lr", "weight decay", "method arguments",
                  "diverged runs"], rows)


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def lambda_blocks(summary: Mapping, runs: Mapping, out_dir: Path) -> list[Block]:
    """Dynamic BIRM's lambda and R_inv over training (selected draw, first seed) and extremes."""
    if "dynamic_birm" not in summary["methods"]:
        return []
    traces = {}
    for example in EXAMPLES:
        draw = summary["results"][example]["dynamic_birm"]["draw"]
        run = runs.get((example, "dynamic_birm", draw, 0))
        if run is not None and run.trace:
            traces[example] = run.trace
    if not traces:
        return []
    plot_series(traces, ["lambda", "R_inv"], out_dir / "lambda.png",
                "Dynamic BIRM, selected draw, first seed", log_keys=["lambda", "R_inv"])
    extremes = summary["lambda"]
    rows = [[ex, _short(v["lambda_max"]), _short(v["R_inv_min"])] for ex, v in extremes.items()]
    return [
        Heading("Dynamic BIRM's penalty weight"),
        Paragraph(
            "lambda and R_inv of the selected draw over training (first data seed), and over every "
            "draw and seed the largest lambda reached and the smallest R_inv while the penalty was on."
        ),
        Image("lambda.png", "Dynamic BIRM lambda and R_inv"),
        Table(["example", "largest lambda (all runs)", "smallest R_inv (all runs)"], rows),
    ]


def protocol_paragraph(summary: Mapping) -> Paragraph:
    """What was run, in numbers."""
    p = summary["protocol"]
    return Paragraph(
        f"{p['n_envs']} environments, {p['dim_inv']} invariant and {p['dim_spu']} spurious "
        f"dimensions; {p['n_per_env']} training rows and {p['n_eval_per_env']} validation and "
        f"test rows per environment; {p['steps']} full-batch Adam steps per model; {p['n_draws']} "
        f"hyperparameter draws (draw 0 = defaults) x {p['n_seeds']} data seeds per example and "
        f"method; selection on the training environments' validation error; cells: test error of "
        f"the selected draw, mean ± std over data seeds, averaged over the test environments "
        f"(mean squared error for Example1/1s, 0-1 error otherwise). Budget {summary['budget']!r}; "
        f"wall time {summary['seconds']:.0f} s, launcher {_launcher_words(summary['launcher'])}."
        + (" Quick run: a smoke test, too small for the figures to mean much." if summary["quick"] else "")
    )


def _launcher_words(launcher: Mapping) -> str:
    if launcher["kind"] == "local":
        return f"local, {launcher['workers'] or 1} process(es)"
    return str(launcher["kind"])


def reference_paragraph(summary: Mapping) -> Paragraph:
    """Where the published figures come from and how they average, or why none are shown."""
    p, reference = summary["protocol"], summary["reference"]
    if reference is None:
        return Paragraph(
            f"No published row for this setting ({p['n_envs']} environments, {p['dim_inv']} invariant and "
            f"{p['dim_spu']} spurious dimensions): the authors published {summary['published_settings']}."
        )
    skipped = ""
    if reference["not_comparable"]:
        skipped = (f" Their {' and '.join(reference['not_comparable'])} figures at this setting used a test split "
                   "that shuffled the wrong columns (a bug they fixed later): not comparable with ours.")
    return Paragraph(
        f"Published: {reference['paper']}; {reference['source']} (the row for {p['n_envs']} environments, "
        f"{p['dim_spu']} spurious dimensions; they published {summary['published_settings']}). Both tables "
        "average the test error over all test environments and give the standard deviation over data "
        "seeds averaged over the environments, as the authors' collect_results.py does (from 4 "
        "environments on, Example1's later environments have larger scales and dominate its average). "
        "They ran 20 hyperparameter draws x 50 data seeds, 10,000 full-batch Adam steps and 10,000 rows "
        "per environment and split, with the same search ranges and selection rule (`--budget paper`). "
        "ANDMask and IGA are not implemented here; V-REx, GroupDRO, BIRM and Dynamic BIRM were not in the "
        "paper." + skipped
    )


def spread_table(summary: Mapping) -> Table:
    """Per example, ERM / IRMv1 / Oracle against the published spread: within one published
    standard deviation of the published mean or not, and how many standard deviations away."""
    verdicts = summary["within_spread"]
    rows = []
    for label, ours, theirs in ROWS:
        if ours is None or theirs is None or ours not in summary["methods"]:
            continue
        row = [label]
        for example in EXAMPLES:
            verdict = verdicts[example].get(ours)
            if verdict is None or verdict["within"] is None:
                row.append("not comparable")
                continue
            away = "" if verdict["sds"] is None else f" ({verdict['sds']:+.1f} sd)"
            row.append(("within" if verdict["within"] else "outside") + away)
        rows.append(row)
    return Table(["method", *EXAMPLES], rows)


def spread_grid_table(summaries: Mapping[str, Mapping]) -> Table:
    """Several settings' ERM and IRMv1 (and Oracle where run) against the published row of each.

    Args:
        summaries: {name: a `demo invariance` results.json}; shown by number of environments,
            then of spurious dimensions.

    Cells: "ours (published mean ± std) in|out", "n.c." where the published figure used another
    test split; the last column counts the cells within the spread of those comparable.
    """
    rows = []
    order = sorted(summaries.values(), key=lambda s: (s["protocol"]["n_envs"], s["protocol"]["dim_spu"]))
    for summary in order:
        p, reference, verdicts = summary["protocol"], summary["reference"], summary["within_spread"]
        if reference is None:
            continue
        setting = f"{p['n_envs']} envs, {p['dim_spu']} spurious"
        for label, ours, theirs in ROWS:
            if ours is None or theirs is None or ours not in summary["methods"]:
                continue
            row, inside, comparable = [setting, label], 0, 0
            for example in EXAMPLES:
                verdict, k = verdicts[example][ours], digits(example)
                published = reference["results"][example][theirs]
                if verdict["within"] is None:
                    row.append("n.c.")
                    continue
                comparable += 1
                inside += verdict["within"]
                row.append(f"{summary['results'][example][ours]['mean']:.{k}f} "
                           f"({published['mean']:.{k}f} ± {published['std']:.{k}f}) "
                           + ("in" if verdict["within"] else "out"))
            rows.append(row + [f"{inside} of {comparable}"])
    return Table(["setting", "method", *EXAMPLES, "within"], rows)


def inferred_envs_table(summary: Mapping) -> Table | None:
    """Per example: the purity of EIIL's split against the given environments, and IRMv1 / Dynamic
    BIRM test error trained on the given environments and on EIIL's (None if no EIIL method ran)."""
    pairs = [(given, inferred) for inferred, given in (("irm_eiil", "irm"), ("dynamic_birm_eiil", "dynamic_birm"))
             if inferred in summary["methods"]]
    if not pairs:
        return None
    header = ["example", "EIIL purity (given envs)"]
    for given, _ in pairs:
        header += [f"{LABELS[given]}, given envs", f"{LABELS[given]}, EIIL envs"]
    rows = []
    for example in EXAMPLES:
        row = [example, f"{100 * summary['purity'][example]:.1f}%"]
        for given, inferred in pairs:
            row += [cell(summary["results"][example].get(given), digits(example)),
                    cell(summary["results"][example][inferred], digits(example))]
        rows.append(row)
    return Table(header, rows)


def short_of_irm(summary: Mapping) -> Paragraph | None:
    """Where BIRM or Dynamic BIRM has a higher test error than IRMv1 (None if neither ran)."""
    results = summary["results"]
    methods = [m for m in ("birm", "dynamic_birm") if m in summary["methods"]]
    if "irm" not in summary["methods"] or not methods:
        return None
    lines = []
    for method in methods:
        worse = [ex for ex in EXAMPLES if not results[ex][method]["mean"] <= results[ex]["irm"]["mean"]]
        lines.append(f"{LABELS[method]} falls short of IRMv1 (higher mean test error) on "
                     f"{', '.join(worse)}." if worse else f"{LABELS[method]} is at or below IRMv1 on every example.")
    return Paragraph(" ".join(lines))


def verdict_blocks(summary: Mapping) -> list[Block]:
    """The `Verdict` section: every method but the oracle against ERM per example, computed from the
    selected draws' per-seed test errors (`analysis.verdict`)."""
    scores = {
        LABELS[method]: {ex: dict(zip(summary["results"][ex][method]["seeds"], summary["results"][ex][method]["per_seed"]))
                         for ex in EXAMPLES}
        for method in summary["methods"]
    }
    if "erm" not in summary["methods"]:
        return [Heading("Verdict"), Paragraph("ERM did not run: no method is compared with a baseline.")]
    comparisons = compare_all(scores, LABELS["erm"], skip=[LABELS["oracle"]], higher_is_better=False)
    lines = verdict_sentences(
        comparisons, what="example", fmt=lambda v: f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}",
        metric="the test error averaged over the test environments (mean squared error on Example1/1s, "
               "0-1 error otherwise; lower is better)",
        selection="training-environment validation (per method, the hyperparameter draw with the smallest "
                  "validation error summed over the training environments, averaged over data seeds)")
    return [Heading("Verdict"), *(Paragraph(line) for line in lines)]


def our_table(summary: Mapping, cell: Callable[[Mapping, str], str]) -> Table:
    """Rows: our methods that ran; columns: the examples; `cell(selection entry, example)` fills a cell."""
    rows = [[label, *(cell(summary["results"][ex][ours], ex) for ex in EXAMPLES)]
            for label, ours, _ in ROWS if ours is not None and ours in summary["methods"]]
    return Table(["method", *EXAMPLES], rows)


def seed_table(summary: Mapping) -> Table:
    """Per method and example, the selected draw's test error in each data seed, then mean ± sd over
    seeds (ddof 1) [95% interval resampling seeds]."""
    return our_table(summary, lambda entry, ex: seeds_cell(entry["per_seed"], digits(ex)))


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


def reading_blocks(summary: Mapping) -> list[Block]:
    """What the table says, per example, from the measured numbers."""
    results, reference = summary["results"], summary["reference"]
    lines = []
    for example in EXAMPLES:
        ours = results[example]
        k = digits(example)
        candidates = [m for m in ours if m != "oracle" and np.isfinite(ours[m]["mean"])]
        best = min(candidates, key=lambda m: ours[m]["mean"]) if candidates else None
        anchors = [f"{LABELS[m]} {ours[m]['mean']:.{k}f}" for m in ("erm", "oracle") if m in ours]
        if best is not None:
            anchors.append(f"lowest without the oracle: {LABELS[best]} {ours[best]['mean']:.{k}f}")
        line = f"{example}: " + "; ".join(anchors)
        lines.append(line + ".")
    blocks: list[Block] = [Heading("Reading"), Paragraph(" ".join(lines))]
    one = results["Example1"]
    if "irm" in one and "erm" in one:
        verdict = ("beats" if one["irm"]["mean"] + one["irm"]["std"] < one["erm"]["mean"] - one["erm"]["std"]
                   else "does not clearly beat")
        text = (f"Positive control (Example1, where the paper's IRMv1 beats ERM): our IRMv1 "
                f"{one['irm']['mean']:.2f} ± {one['irm']['std']:.2f} {verdict} ERM "
                f"{one['erm']['mean']:.2f} ± {one['erm']['std']:.2f}")
        if reference is not None:
            published = reference["results"]["Example1"]
            text += (f" (published: IRMv1 {published['IRMv1']['mean']:.2f}, ERM {published['ERM']['mean']:.2f}, "
                     f"oracle {published['Oracle']['mean']:.2f})")
        blocks.append(Paragraph(text + "."))
    shortfall = short_of_irm(summary)
    if shortfall is not None:
        blocks.append(shortfall)
    return blocks


def inferred_blocks(summary: Mapping) -> list[Block]:
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


def worst_env_table(summary: Mapping) -> Table:
    """Per method and example, the selected draw's error on its worst test environment (seed mean),
    beside the average over environments that the main table gives."""
    def worst(entry: Mapping, ex: str) -> str:
        per_env = entry["per_env"]
        finite = [v for v in per_env if np.isfinite(v)]
        if not finite or len(finite) != len(per_env):
            return "diverged"
        return f"{max(finite):.{digits(ex)}f} / {np.mean(finite):.{digits(ex)}f}"

    return our_table(summary, worst)


def write_invariance_report(
    summary: Mapping, runs: Mapping, out_dir: str | Path
) -> tuple[Path, Path]:
    """Draw the figures and write report.md and report.html into `out_dir`.

    Args:
        summary: `run_invariance_demo`'s results.json content.
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
    ] if summary["within_spread"] is not None else []
    blocks: list[Block] = [
        Heading("Linear unit tests of invariance", 1),
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
    return write_page(blocks, out_dir, title="Linear unit tests of invariance")
