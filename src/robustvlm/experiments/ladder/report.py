"""The invariance ladder's report (`experiments.ladder.run`): one summary table and one plot of
colour-free accuracy (methods x rungs), a table per rung, and the verdicts computed from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from robustvlm.analysis.verdict import Comparison, verdict_sentences, winners_sentence
from robustvlm.experiments.ladder.paired import LadderPaired
from robustvlm.experiments.ladder.paired_report import (
    READING_WORDS,
    ladder_established,
    paired_blocks,
    paired_sentence,
    runs_left_out,
)
from robustvlm.experiments.ladder.readings import (
    COLOUR_FREE,
    ORACLE,
    REVERSED,
    MethodSummary,
    Stats,
    Summary,
    beats_erm,
    is_vlm_cell,
    ladder_comparisons,
)
from robustvlm.experiments.ladder.results import LadderResults
from robustvlm.experiments.ladder.rung import parse_cell
from robustvlm.model_ref import TINY
from robustvlm.objectives import REGISTRY
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table, write_page
from robustvlm.report.plots import new_figure, save_figure
from robustvlm.report.smoke import page_title, smoke_verdict

ORACLE_LABEL = "grayscale oracle"
#: the report's title
TITLE = "The invariance ladder"


def label(method: str) -> str:
    """How the report names a method: its objective's registered label; the grayscale oracle."""
    return ORACLE_LABEL if method == ORACLE else REGISTRY[method].label


def colour(method: str) -> str:
    """A method's bar colour: its objective's registered colour; grey for the oracle."""
    return "0.6" if method == ORACLE else REGISTRY[method].colour


def shown_methods(summary: Mapping[str, Mapping[str, MethodSummary]]) -> list[str]:
    """The methods of any rung of `summary`, in the objectives registry's order, the oracle last."""
    ran = {method for entries in summary.values() for method in entries}
    return [m for m in (*REGISTRY, ORACLE) if m in ran]
READINGS = READING_WORDS
PUBLISHED = ("The IRM paper (Arjovsky et al. 2019; 50,000 MNIST digits, MLP 390 wide, 10 restarts), test "
             "accuracy on the reversed environment: ERM 17.1 ± 0.6, IRMv1 66.9 ± 2.5, grayscale oracle 73.0 ± "
             "0.4; the best invariant rule scores 75.")


def pct(entry: Stats | None) -> str:
    """"mean ± sd" in percent of per-seed `Stats`; the mean alone from one seed ("n/a" when
    nothing was measured)."""
    if entry is None or entry.mean is None:
        return "n/a"
    if entry.n < 2 or entry.std is None:
        return f"{100 * entry.mean:.1f}"
    return f"{100 * entry.mean:.1f} ± {100 * entry.std:.1f}"


def summary_table(summary: Summary, reading: str) -> Table:
    """Methods x rungs: colour-free accuracy under `reading`; "*" marks a method that beats ERM
    by more than the seeds' spread."""
    cells = list(summary)
    rows = []
    for method in shown_methods(summary):
        row = [label(method)]
        for cell in cells:
            entry = summary[cell].get(method)
            mark = " *" if method not in ("erm", ORACLE) and entry and beats_erm(summary, cell, method, reading) else ""
            row.append(pct(entry.readings[reading].get(COLOUR_FREE) if entry else None) + mark)
        rows.append(row)
    return Table(["method", *cells], rows)


SEED_READINGS = ("final", "oracle")
"""The readings of `ladder_seeds_table`: the final step and the test-domain oracle's pick."""


def ladder_seeds_table(summary: Summary) -> Table:
    """Seed by seed, each rung's colour-free accuracy (%) per method under the final step and the
    oracle's pick (`SEED_READINGS`), "+" where a method beats ERM's same seed; a last row per rung
    counts the seeds each method beats ERM in."""
    methods = shown_methods(summary)
    header = ["rung", "seed", *(f"{label(m)} ({reading})" for m in methods for reading in SEED_READINGS)]
    rows = []
    for cell, entries in summary.items():
        values = {(m, r): entries[m].readings[r][COLOUR_FREE].values if m in entries and COLOUR_FREE in
                  entries[m].readings[r] else {} for m in methods for r in SEED_READINGS}
        seeds = sorted({seed for v in values.values() for seed in v}, key=int)
        wins = dict.fromkeys(values, 0)
        for seed in seeds:
            row = [cell, seed]
            for (method, reading), by_seed in values.items():
                erm = values.get(("erm", reading), {}).get(seed)
                value = by_seed.get(seed)
                better = method != "erm" and value is not None and erm is not None and value > erm
                wins[method, reading] += better
                row.append("n/a" if value is None else f"{100 * value:.1f}" + (" +" if better else ""))
            rows.append(row)
        rows.append([cell, "beats ERM in", *("" if m == "erm" else f"{wins[m, r]} of {len(values[m, r])}"
                                             for m, r in values)])
    return Table(header, rows)


def cell_table(entries: Mapping[str, MethodSummary], train_envs: list[str]) -> Table:
    """One rung: per method the final accuracies (colour-free also seed by seed), worst environment,
    rule, and the colour-free accuracy under the two selection rules."""
    rows = []
    for method in shown_methods({"": entries}):
        e = entries[method]
        means = [e.final[n].mean for n in train_envs if n in e.final]
        train = [m for m in means if m is not None]
        train_text = f"{100 * np.mean(train):.1f}" if train and len(train) == len(means) else "n/a"
        free = e.final[COLOUR_FREE].values if COLOUR_FREE in e.final else {}
        rows.append([label(method), train_text, pct(e.final.get(REVERSED)), pct(e.final.get(COLOUR_FREE)),
                     ", ".join(f"{100 * v:.1f}" for v in free.values()) or "n/a",
                     pct(e.worst), e.rule or "n/a", pct(e.readings["training-domain"].get(COLOUR_FREE)),
                     pct(e.readings["oracle"].get(COLOUR_FREE)), f"{e.n_diverged}/{e.n_seeds}"])
    return Table(["method", "train", "reversed", "colour-free", "colour-free per seed", "worst env", "rule learned",
                  "colour-free (TD val)", "colour-free (oracle)", "diverged"], rows)


def ladder_plot(summary: Summary, path: Path) -> Path:
    """Grouped bars: colour-free accuracy at the final step per rung and method (± sd over seeds),
    with chance (50%) and the content rule (75%) marked."""
    cells = list(summary)
    methods = shown_methods(summary)
    fig, ax = new_figure(size=(max(7.0, 2.2 * len(cells) + 2), 4.5))
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        means, sds = [], []
        for cell in cells:
            entry = summary[cell][method].final.get(COLOUR_FREE) if method in summary[cell] else None
            means.append(100 * entry.mean if entry and entry.mean is not None else np.nan)
            sds.append(100 * entry.std if entry and entry.std is not None else 0.0)
        ax.bar(np.arange(len(cells)) + (j - (len(methods) - 1) / 2) * width, means, width, yerr=sds, capsize=2,
               label=label(method), color=colour(method))
    ax.axhline(50, color="k", lw=0.8, ls=":", label="chance")
    ax.axhline(75, color="k", lw=0.8, ls="--", label="content rule (75%)")
    ax.set_xticks(np.arange(len(cells)), cells, fontsize=8)
    ax.set_xlim(-0.6, len(cells) - 0.4)
    ax.set_ylabel("colour-free accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("The invariance ladder: colour-free test accuracy, final step")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def verdicts(summary: Summary) -> Table:
    """Per rung and reading, the invariant methods that beat ERM on the colour-free environment."""
    rows = []
    for cell, entries in summary.items():
        row = [cell]
        for reading in READINGS:
            winners = [label(m) for m in entries if m not in ("erm", ORACLE) and beats_erm(summary, cell, m, reading)]
            row.append(", ".join(winners) if winners else "none")
        rows.append(row)
    return Table(["rung", *READINGS.values()], rows)


def verdict_blocks(summary: Summary, paired: LadderPaired | None = None, quick: bool = False) -> list[Block]:
    """The `Verdict` section (a quick run's: that it is a smoke test, `report.smoke`): whether its headline is
    established (`experiments.ladder.paired_report.ladder_established`; no rounding-perturbation re-run is known when the
    demo writes it), then every invariant method
    against ERM per rung on the colour-free and reversed environments at the final step
    (`experiments.ladder.readings.ladder_comparisons`; its one-line conclusion first), then who beat ERM under
    the two selection rules; with `paired`, what the paired test over the test pictures separates
    under each reading (`experiments.ladder.paired_report`)."""
    def named(comparisons: list[Comparison]) -> list[Comparison]:
        return [replace(c, method=label(c.method), baseline=label("erm")) for c in comparisons]

    if quick:
        return smoke_verdict(f"every method trained on every rung ({', '.join(summary)}) for every seed and "
                             "was scored on every test environment")

    def points(v: float) -> str:
        return f"{100 * v:.1f}"

    final = named(ladder_comparisons(summary, "final"))
    lines = verdict_sentences(
        final, fmt=points, what="rung", rule="the larger sd over seeds, ddof 0, and at least 1 point",
        metric="test accuracy in % on the colour-free (test-nocolour) and reversed (test-reversed) environments "
               "(higher is better; chance 50, the content rule 75)",
        selection="the final training step (the IRM paper's protocol)")
    lines += [winners_sentence(named(ladder_comparisons(summary, reading)), selection=READINGS[reading], fmt=points)
              for reading in ("oracle", "training-domain")]
    lines += [line for reading in READINGS if (line := paired_sentence(paired or {}, reading, label))]
    if paired and (left := runs_left_out(paired)):
        lines.append(f"Up to {left} run(s) per rung were kept from before per-picture answers were recorded and "
                     "are left out of the paired test; re-run them into a fresh folder to include them.")
    first = [ladder_established(paired or {}, None, label)]
    return [Heading("Verdict"), *(Paragraph(line) for line in first + lines)]


def inference_blocks(results: LadderResults) -> list[Block]:
    """How pure the inferred environments are, and what invariance training makes of them beside
    the given environments."""
    inference, inferred = results.inference, results.inferred_summary
    if not inference:
        return []
    blocks: list[Block] = [
        Heading("Environments inferred from data"),
        Paragraph("Without environment labels: an ERM reference model (seed 0) trained on the pooled training "
                  "rows, then two environments from EIIL (the split that maximises its IRMv1 penalty), a loss "
                  "split at the median, or k-means of its penultimate features. Purity: the share of rows in "
                  "their environment's majority group, against the given environments (train-0.9 / train-0.8) "
                  "and against whether the colour agrees with the label."),
    ]
    for cell, splits in inference.items():
        rows = [[name, " / ".join(map(str, v.sizes)), f"{100 * v.purity_given:.1f}",
                 f"{100 * v.purity_colour:.1f}"] for name, v in splits.items()]
        blocks += [Paragraph(f"`{cell}`:"), Table(["split", "sizes", "purity vs given (%)",
                                                   "purity vs colour agreement (%)"], rows)]
        header = ["method", "environments", "reversed", "colour-free", "rule learned"]
        table = []
        for method in ("erm", "irm", "dynamic_birm"):
            sources = {"given": results.summary.get(cell, {}).get(method)}
            if method != "erm":
                sources.update({name: inferred.get(name, {}).get(cell, {}).get(method) for name in splits})
            for envs, entry in sources.items():
                if entry:
                    table.append([label(method), envs, pct(entry.final.get(REVERSED)),
                                  pct(entry.final.get(COLOUR_FREE)), entry.rule or "n/a"])
        blocks += [Paragraph("Final-step accuracy (%) with the given and the inferred environments:"),
                   Table(header, table)]
    return blocks


def protocol_text(results: LadderResults) -> str:
    """The data, protocol and cost of the pixel and tower rungs."""
    plan, paper = results.plan, results.paper
    per_env = plan.per_env if plan.per_env is not None else "all"
    return (f"Colored MNIST built as the IRM paper builds it (0-4 vs 5-9, 25% label noise, colour agreeing with "
            f"the noisy label 90% / 80% in training, 10% in `test-reversed`, 50% in `test-nocolour`), {per_env} "
            f"images per environment ({int(100 * plan.holdout)}% of each training environment held out for "
            f"training-domain validation). The IRM paper's protocol and hyperparameters (full-batch Adam, lr "
            f"{paper['lr']:.3g}, L2 {paper['l2']:.3g}, {plan.steps} steps, penalty weight "
            f"{paper['penalty_weight']:.0f} after {plan.anneal} steps for every annealed method), the MLP "
            f"{plan.hidden} wide (the paper's: {paper['hidden']:.0f}; narrower to fit 2 CPU cores). Seeds: "
            f"{len(plan.seeds)}; {results.seconds:.0f} s, {sum(results.cpu_seconds.values()):.0f} "
            f"CPU-seconds.")


def vlm_models_text(cells: list[str]) -> str:
    """Which models the VLM rungs of `cells` ("source/vlm:mode:model") start from, and what the seed sets."""
    models = {rung.model for rung in (parse_cell(cell)[1] for cell in cells) if rung.model is not None}
    pretrained = sorted(m.name for m in models if m.kind != TINY)
    tiny = "the tiny offline Idefics3 (random weights, built per seed)"
    if not pretrained:
        return tiny
    return (f"the pretrained {', '.join(f'`{m}`' for m in pretrained)} (the same weights in every seed; the seed "
            f"sets the batches and the LoRA's initial weights; pictures at the model's own processor size)"
            + (f" and {tiny}" if len(pretrained) < len(models) else ""))


def vlm_protocol_text(results: LadderResults) -> str:
    """How the VLM rungs were trained (empty when the run has none)."""
    vlm = results.plan.vlm
    cells = [cell for cell in results.summary if is_vlm_cell(cell)]
    if not cells:
        return ""
    return (f"VLM rungs: {vlm_models_text(cells)}, {vlm.per_env} images per environment resized to "
            f"{vlm.image_size} x {vlm.image_size}, {vlm.steps} AdamW steps of "
            f"{vlm.batch_size} rows (half from each training environment) at peak lr {vlm.lr:g} with "
            f"`train`'s warm-up and cosine decay and gradient clipping at 1, the penalty weight switching from 1 to "
            f"{vlm.penalty_weight:g} after {vlm.anneal} steps (Dynamic BIRM: its own weight after "
            f"{vlm.anneal} steps); accuracy: the answer whose first token has the larger logit.")


def zero_shot_table(results: LadderResults) -> Table:
    """Per pretrained model and picture kind: its accuracy (%) before fine-tuning on the ladder's
    question (against the noisy labels and the clean group) per environment, and its ten-way
    answer's group on the test environments (`experiments.ladder.zero_shot`)."""
    envs = [*results.train_envs, *results.test_envs]
    rows = []
    for model, z in results.zero_shot.items():
        for kind in z.ladder_noisy:
            rows.append([f"`{model}`", kind,
                         *(f"{100 * z.ladder_noisy[kind][e]:.1f} / {100 * z.ladder_clean[kind][e]:.1f}" for e in envs),
                         *(f"{100 * z.ten_way[kind][e]:.1f}" for e in results.test_envs)])
    return Table(["model", "pictures", *(f"ladder question, {e} (noisy / clean)" for e in envs),
                  *(f"ten-way question's group, {e}" for e in results.test_envs)], rows)


def zero_shot_blocks(results: LadderResults) -> list[Block]:
    """The pretrained models' zero-shot readings (none without a pretrained VLM rung)."""
    if not results.zero_shot:
        return []
    pictures = ", ".join(str(z.ten_way_pictures) for z in results.zero_shot.values())
    return [Heading("Before fine-tuning: what the pretrained model reads"),
            Paragraph("Zero-shot accuracy (%) on the ladder's pictures, coloured and grey: the ladder's question "
                      "scored as the rungs score it (the answer with the larger first-token logit) against the "
                      "noisy labels and the clean group (classes 0-4 / 5-9); and the zoo's own ten-way question "
                      f"(first {pictures} pictures of each test environment), its answer's group against the "
                      "clean group. Chance 50."),
            zero_shot_table(results)]


def write_ladder_report(results: LadderResults, out_dir: Path) -> tuple[Path, Path]:
    """report.md and report.html (with ladder.png) in `out_dir`."""
    summary = results.summary
    ladder_plot(summary, out_dir / "ladder.png")
    blocks: list[Block] = [Heading(page_title(TITLE, results.quick), 1),
                           *verdict_blocks(summary, results.paired, results.quick)]
    blocks += [
        *([Paragraph(protocol_text(results))] if not all(map(is_vlm_cell, summary)) else []),
        Paragraph("Rungs: `pixels` is the IRM paper's MLP on the 2 x 14 x 14 pixels; `tower:M` is the same MLP "
                  "head on the standardised pooled features of model M's frozen vision tower (random-weight "
                  "tiny models, offline); `vlm:MODE:M` is the generative model M asked the benchmark's "
                  "two-option question about each picture and trained on its answer tokens as `train` trains "
                  "it: `head`, backbone frozen, projector and a LoRA on the last decoder layer trained; `lora` "
                  "and `full`, `train`'s trainable modes. " + vlm_protocol_text(results)),
        Heading("Colour-free accuracy, final step"),
        summary_table(summary, "final"),
        Image("ladder.png", "colour-free accuracy per rung and method"),
        Heading("Colour-free accuracy, test-domain oracle selection"),
        summary_table(summary, "oracle"),
        Heading("Colour-free accuracy, training-domain validation"),
        summary_table(summary, "training-domain"),
        Heading("Who beats ERM"),
        Paragraph("Invariant methods whose colour-free accuracy beats ERM's by more than the seeds' spread and by "
                  "at least one point (* in the tables above):"),
        verdicts(summary),
        Paragraph(PUBLISHED),
        *paired_blocks(results.paired, label),
    ]
    blocks += zero_shot_blocks(results) + inference_blocks(results)
    for cell, entries in summary.items():
        blocks += [Heading(f"Rung `{cell}`", 3), cell_table(entries, results.train_envs)]
    return write_page(blocks, out_dir, title=f"robustvlm: {page_title(TITLE, results.quick)}")
