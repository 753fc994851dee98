"""The study report: report.md (PNG links) and a self-contained report.html (PNGs inlined as base64).

Both pages are rendered from one list of blocks, so they always say the same thing:
the verdict (`analysis.study.study_comparisons`, `analysis.verdict`), Table 1 (methods x ID/OOD
metrics as mean ± std over seeds [95% interval resampling seeds]), the per-seed scores beside the
pooled-row interval, the significance table against the baseline, each method against the
baseline question by question on correctness per environment (`paired_blocks`), a per-environment heatmap, ID
vs OOD bars (mean ± sd over seeds, one dot per seed), lambda / penalty trajectories of the first
seed, and qualitative OOD examples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from robustvlm.analysis.study import (
    SPLITS,
    MethodScores,
    PairedTest,
    ScoreSummary,
    StudyResults,
    StudyScores,
    study_comparisons,
)
from robustvlm.analysis.study_paired import StudyPaired
from robustvlm.analysis.verdict import verdict_sentences
from robustvlm.evaluation.metrics.registry import title
from robustvlm.objectives import REGISTRY
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table, write_page
from robustvlm.report.paired_table import POWER_NOTE, paired_cells, paired_header, paired_section
from robustvlm.report.plots import bar_with_ci, new_figure, plot_series, save_figure
from robustvlm.report.smoke import page_title, smoke_verdict
from robustvlm.report.tables import fmt

TRAJECTORY_KEYS = ["lambda", "R_inv", "P"]
#: a study's page title when its caller names none (`robustvlm study CONFIG` names its config)
STUDY_TITLE = "robustvlm study"
EXAMPLES_PER_ENV = 3


def _interval(ci: tuple[float, float] | None) -> str:
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "—"


def cell(entry: ScoreSummary | None) -> str:
    """'mean ± std [lo, hi]' over seeds of one summary entry (the interval resamples seeds; none
    for one seed); '—' where the metric was not computed."""
    if entry is None or entry.mean is None:
        return "—"
    text = fmt(entry.mean)
    if entry.std is not None:
        text += f" ± {fmt(entry.std)}"
    if entry.seed_ci:
        text += f" {_interval(entry.seed_ci)}"
    return text


def seed_table(scores: StudyScores) -> Table:
    """One row per (method, split, metric) with a score: each seed's score, mean ± sd over seeds,
    the interval resampling seeds and the interval resampling the pooled (seed, example) rows."""
    seeds = list(dict.fromkeys(s for m in scores.methods.values() for by in m.summary.values()
                               for e in by.values() for s in e.per_seed))
    rows = []
    for label, method in scores.methods.items():
        for split in SPLITS:
            for metric in scores.metrics:
                entry = method.summary[split].get(metric)
                if entry is None or entry.mean is None:
                    continue
                per_seed = [fmt(entry.per_seed[s]) if s in entry.per_seed else "—" for s in seeds]
                spread = fmt(entry.mean) + (f" ± {fmt(entry.std)}" if entry.std is not None else "")
                rows.append([label, split.upper(), title(metric), *per_seed, spread, _interval(entry.seed_ci),
                             _interval(entry.ci)])
    return Table(["method", "split", "metric", *(f"seed {s}" for s in seeds), "mean ± sd",
                  "95% CI, seeds resampled", "95% CI, pooled rows resampled"], rows)


def verdict_blocks(scores: StudyScores, *, quick: bool = False, smoke: bool = False) -> list[Block]:
    """The `Verdict` section: every method against the baseline, computed from the seeds' scores,
    then what the paired test over examples pooled across seeds separates (`paired_sentence`); a
    quick or smoke run's says only that it is a smoke test and what it checked (`report.smoke`)."""
    if quick or smoke:
        return smoke_verdict(f"each of {', '.join(scores.methods)} trained and was scored on every environment, "
                             "and the tables below were computed from its predictions",
                             flag="--quick" if quick else "--smoke")
    lines = verdict_sentences(study_comparisons(scores, title), metric="each metric's split score (higher is better)",
                              selection="the final checkpoint of each run (no selection)",
                              fmt=fmt, what="split or metric")
    paired = paired_sentence(scores)
    return [Heading("Verdict"), *(Paragraph(line) for line in [*lines, *([paired] if paired else [])])]


def paired_sentence(scores: StudyScores) -> str | None:
    """How many (method, split, metric) differences with the baseline the paired bootstrap over
    examples (scores averaged over seeds; the Significance section) separates, and which; None
    when none was computed."""
    tests = [(label, split, metric, t) for label, splits in scores.significance.items()
             for split, by_metric in splits.items() for metric, t in by_metric.items() if t is not None]
    if not tests:
        return None
    apart = [f"{label} {split.upper()} {title(metric)} ({t.delta:+.3f})" for label, split, metric, t in tests
             if t.ci[0] > 0 or t.ci[1] < 0]
    named = f": {'; '.join(apart)}" if apart else ""
    return (f"Paired over the shared test examples (each example's score averaged over seeds, the seeds' test set "
            f"being the same), {len(apart)} of {len(tests)} differences with {scores.baseline} have a 95% interval "
            f"excluding zero{named}; the others are within the test set's own noise.")


ZERO_SHOT_ROW = "zero-shot (step 0)"


def table1(scores: StudyScores, zero_shot: MethodScores | None = None) -> Table:
    """Rows = methods (first, with `zero_shot`, the untouched model); columns = ID then OOD for
    each configured metric, then each metric's worst-environment score (lowest per-environment
    mean over every environment, per seed)."""
    metrics = scores.metrics
    header = ["method"] + [f"{g.upper()} {title(m)}" for g in SPLITS for m in metrics]
    header += [f"worst env {title(m)}" for m in metrics]
    rows = [
        [label]
        + [cell(method.summary[g].get(m)) for g in SPLITS for m in metrics]
        + [cell(method.worst.get(m)) for m in metrics]
        for label, method in (({ZERO_SHOT_ROW: zero_shot} if zero_shot else {}) | scores.methods).items()
    ]
    return Table(header, rows)


def per_env_table(results: StudyResults, metric: str) -> Table:
    """Rows = environments (held-out ones marked OOD); columns = the untouched model (with
    `zero_shot`) then each method: the environment's mean `metric`, averaged over seeds."""
    methods = ({ZERO_SHOT_ROW: results.zero_shot} if results.zero_shot else {}) | results.scores.methods
    envs = next(iter(results.scores.methods.values())).per_env
    rows = [[env + (" (OOD)" if scores.ood else ""),
             *(fmt(m.per_env[env].scores.get(metric)) if env in m.per_env else "—" for m in methods.values())]
            for env, scores in sorted(envs.items(), key=lambda item: (item[1].ood, item[0]))]
    return Table([f"environment ({title(metric)})", *methods], rows)


def absent_note(results: StudyResults) -> list[Block]:
    """One paragraph naming each tabulated metric no run computed, and why."""
    if not results.absent:
        return []
    reasons = "; ".join(f"{title(m)}: {why}" for m, why in results.absent.items())
    return [Paragraph(f"Shown as — because they were not computed: {reasons}.")]


def cee_counts_table(results: StudyResults) -> list[Block]:
    """Per method, the samples the CEE judges left undecided (summed over seeds), if CEE ran."""
    rows = [
        [label, *(str(c[k]) for k in ("n_judged", "n_ties", "n_no_verdict", "n_unparsed_verdicts"))]
        for label, runs in results.runs.items()
        if (c := runs.cee_counts)
    ]
    if not rows:
        return []
    return [
        Paragraph(
            "CEE: samples judged, majority ties and samples without any readable verdict (both left "
            "out of the CEE means, not counted wrong), and unreadable single verdicts; summed over seeds."
        ),
        Table(["method", "judged", "ties", "no verdict", "unreadable verdicts"], rows),
    ]


def _test_cells(test: PairedTest | None) -> list[str]:
    if test is None:
        return ["—", "—", "—", "0"]
    return [f"{test.delta:+.3f}", f"[{test.ci[0]:+.3f}, {test.ci[1]:+.3f}]", f"{test.p_value:.4f}", str(test.n)]


def significance_table(results: StudyResults) -> Table:
    """One row per (method, split, metric): delta vs the baseline, its CI, p-value, n."""
    rows = [
        [label, split.upper(), title(metric), *_test_cells(test)]
        for label, splits in results.scores.significance.items()
        for split, by_metric in splits.items()
        for metric, test in by_metric.items()
    ]
    return Table(
        ["method", "split", "metric", f"Δ vs {results.scores.baseline}", "95% CI", "p", "n"], rows
    )


def heatmap(results: StudyResults, metric: str, path: Path) -> Path | None:
    """Methods x environments heatmap of one metric (OOD environments marked); None if unscored."""
    methods = results.scores.methods
    labels = list(methods)
    envs = sorted({e for scores in methods.values() for e in scores.per_env})

    def value(label: str, env: str) -> float:
        entry = methods[label].per_env.get(env)
        score = None if entry is None else entry.scores.get(metric)
        return np.nan if score is None else score

    grid = np.array([[value(m, e) for e in envs] for m in labels], dtype=float)
    if np.isnan(grid).all():
        return None
    ood = {e for scores in methods.values() for e, v in scores.per_env.items() if v.ood}
    fig, ax = new_figure(size=(1.1 * len(envs) + 2.5, 0.6 * len(labels) + 1.8))
    image = ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(
        range(len(envs)), [f"{e} (OOD)" if e in ood else e for e in envs], rotation=30, ha="right"
    )
    ax.set_yticks(range(len(labels)), labels)
    for i in range(len(labels)):
        for j in range(len(envs)):
            if not np.isnan(grid[i, j]):
                ax.text(
                    j,
                    i,
                    f"{grid[i, j]:.2f}",
                    ha="center",
                    va="center",
                    color="black" if grid[i, j] > 0.6 else "white",
                    fontsize=8,
                )
    fig.colorbar(image, ax=ax, label=title(metric))
    ax.set_title(f"{title(metric)} per environment (mean over seeds)")
    return save_figure(fig, path)


def id_ood_bars(results: StudyResults, metric: str, path: Path) -> Path | None:
    """ID and OOD bars per method: mean over seeds, error bars ± sd over seeds, one dot per seed;
    None if the metric is unscored."""
    labels, means, los, his, points = [], [], [], [], []
    for label, scores in results.scores.methods.items():
        for split in SPLITS:
            entry = scores.summary[split].get(metric)
            if entry is None or entry.mean is None:
                continue
            sd = entry.std or 0.0
            labels.append(f"{label} {split.upper()}")
            means.append(entry.mean)
            los.append(entry.mean - sd)
            his.append(entry.mean + sd)
            points.append(list(entry.per_seed.values()))
    if not labels:
        return None
    return bar_with_ci(
        labels,
        means,
        los,
        his,
        path,
        f"ID vs OOD {title(metric)} (mean ± sd over seeds; dots: seeds)",
        ylabel=title(metric),
        points=points,
    )


def qualitative(
    predictions: Mapping[str, Sequence[dict]], per_env: int = EXAMPLES_PER_ENV
) -> list[Block]:
    """The first `per_env` examples of each OOD environment with every method's output."""
    by_method = {label: {r["id"]: r for r in rows} for label, rows in predictions.items()}
    first = next(iter(predictions.values()), [])
    blocks: list[Block] = []
    for env in sorted({r["env"] for r in first if r["ood"]}):
        picked = [r for r in first if r["env"] == env][:per_env]
        blocks.append(Heading(f"OOD environment `{env}`", 3))
        for r in picked:
            rows = [["instruction", r["instruction"]], ["reference", r["target"]]]
            rows += [
                [label, rows_by_id[r["id"]]["prediction"] if r["id"] in rows_by_id else "—"]
                for label, rows_by_id in by_method.items()
            ]
            blocks.append(Table(["", f"example `{r['id']}`"], [[k, _one_line(v)] for k, v in rows]))
    return blocks


def _one_line(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") or "(empty)"


def _objective(name: str) -> str:
    """An objective's display name from the registry (the name itself when it is not registered)."""
    return REGISTRY[name].label if name in REGISTRY else name


def intro(results: StudyResults) -> Paragraph:
    """What the tables show: methods, seeds, scale, cells and the worst environment."""
    return Paragraph(
        f"Methods: {', '.join(f'{label} ({_objective(results.runs[label].method)})' for label in results.runs)}; "
        f"seeds: {results.seeds}. Scores on the 0-1 scale, "
        "macro-averaged over the environments of each split. Cells: mean ± std over seeds "
        "[95% percentile bootstrap interval of the mean resampling the seeds; none for one seed]; "
        "the per-seed table below also gives the interval resampling the (seed, example) rows "
        "pooled over seeds, which hides the seed spread. Worst env: per seed, the lowest "
        "per-environment mean over every environment (in-domain and out-of-domain), then mean ± "
        "std over seeds; a macro mean can hide a method that fails one environment. — marks a "
        "metric that was not configured or not computed."
    )


def zero_shot_blocks(results: StudyResults) -> list[Block]:
    """With a zero-shot evaluation: what its row is, and each environment's score beside the
    fine-tuned methods' (where a fine-tuning gain or loss sits)."""
    if results.zero_shot is None:
        return []
    return [
        Paragraph(f"{ZERO_SHOT_ROW}: the model the study fine-tunes, evaluated untouched on the same "
                  "records (one evaluation: no seeds, no significance test)."),
        Heading("Per-environment scores beside the untouched model"),
        *(per_env_table(results, metric) for metric in results.scores.metrics),
    ]


def _seed_mcnemar(paired: StudyPaired) -> tuple[str, str]:
    """The discordant counts and McNemar p of each seed ("s0: 3 / 1; s1: ..." with several)."""
    tests = paired.seed_mcnemar
    if len(tests) == 1:
        ((a, b, p),) = tests.values()
        return f"{a} / {b}", f"{p:.3g}"
    return ("; ".join(f"s{s}: {a} / {b}" for s, (a, b, _) in tests.items()),
            "; ".join(f"s{s}: {p:.3g}" for s, (_, _, p) in tests.items()))


def paired_blocks(scores: StudyScores) -> list[Block]:
    """The section comparing each method with the baseline question by question on correctness,
    per environment (`analysis.study_paired`); nothing when no run scored a 0/1 metric."""
    base = scores.methods[scores.baseline].per_env
    rows, delta = [], 0.05
    for label, by_metric in scores.paired.items():
        for metric, groups in by_metric.items():
            for env, paired in groups.items():
                ood = " (OOD)" if env in base and base[env].ood else ""
                delta = paired.comparison.power_delta
                rows.append([label, title(metric), env + ood, *paired_cells(paired.comparison, _seed_mcnemar(paired))])
    explanation = (
        f"Each method against {scores.baseline} on the same questions, per environment, on per-question "
        "correctness (exact match; CEE where the judge ran). Each question's score is averaged over the "
        "seeds where both runs scored it; the difference is method − baseline with a 95% paired bootstrap "
        "interval resampling questions and its standard error. McNemar: the questions only the method / only "
        "the baseline got right and the exact two-sided p-value, per seed (sN). " + POWER_NOTE
    )
    header = ["method", "metric", "environment", *paired_header(delta, "method", scores.baseline)]
    return paired_section(f"Paired comparison with {scores.baseline}, per environment", explanation, header, rows)


def build_blocks(
    results: StudyResults,
    out_dir: Path,
    logs: Mapping[str, Sequence[dict]],
    predictions: Mapping[str, Sequence[dict]],
    *,
    heading: str = STUDY_TITLE,
) -> list[Block]:
    """Draw the figures into `out_dir` and return the report's blocks; `heading` names the study."""
    seeds = results.seeds
    blocks: list[Block] = [
        Heading(page_title(heading, results.smoke or results.quick), 1),
        *verdict_blocks(results.scores, quick=results.quick, smoke=results.smoke),
        *(
            [Paragraph(
                "Smoke test: a tiny randomly initialised model on local built-in data for a few steps, "
                "to check the recipe and the pipeline end to end. These numbers are not results."
            )]
            if results.smoke else []
        ),
        intro(results),
        Heading("Table 1: in-domain vs out-of-domain"),
        table1(results.scores, results.zero_shot),
        *absent_note(results),
        *zero_shot_blocks(results),
        Heading("Per-seed scores"),
        seed_table(results.scores),
        *cee_counts_table(results),
        Heading(f"Significance against {results.scores.baseline}"),
        Paragraph(
            "Paired bootstrap (10,000 resamples) on per-example scores averaged over seeds, paired by "
            "example id; Δ = method − baseline; two-sided p for a zero mean difference."
        ),
        significance_table(results),
        *paired_blocks(results.scores),
        Heading("Per-environment scores and ID vs OOD"),
    ]
    for metric in results.scores.metrics:
        for name, draw in (("heatmap", heatmap), ("bars", id_ood_bars)):
            path = draw(results, metric, out_dir / f"{name}_{metric}.png")
            if path is not None:
                blocks.append(Image(path.name, f"{name} {title(metric)}"))
    keys = [k for k in TRAJECTORY_KEYS if any(k in r for rows in logs.values() for r in rows)]
    if keys:
        plot_series(
            dict(logs),
            keys,
            out_dir / "trajectories.png",
            f"penalty weight and penalty, seed {seeds[0] if seeds else ''}",
            log_keys=["lambda"],
        )
        blocks += [
            Heading("Lambda and penalty trajectories (first seed)"),
            Image("trajectories.png", "trajectories"),
        ]
    blocks += [Heading("Qualitative OOD examples (first seed)")] + qualitative(predictions)
    return blocks


def write_study_report(
    results: StudyResults,
    out_dir: str | Path,
    *,
    logs: Mapping[str, Sequence[dict]],
    predictions: Mapping[str, Sequence[dict]],
    heading: str = STUDY_TITLE,
) -> tuple[Path, Path]:
    """Write the figures, report.md and report.html into `out_dir`; returns (md, html) paths.

    Args:
        results: the finished study.
        logs: {method label: train_log.jsonl rows of its first seed}.
        predictions: {method label: predictions.jsonl rows of its first seed}.
        heading: what the study is (the page's title).
    """
    out_dir = Path(out_dir)
    blocks = build_blocks(results, out_dir, logs, predictions, heading=heading)
    return write_page(blocks, out_dir, title=page_title(heading, results.smoke or results.quick))
