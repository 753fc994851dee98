"""The sweep report: report.md and a self-contained report.html from one list of blocks.

The two selection rules are never mixed: one table per rule, the oracle's labelled as such in its
heading, its columns and the headline table. Accuracies are in %, as DomainBed prints them:
mean ± standard error over trial seeds. Worst-environment accuracy stands beside every macro mean.
"""

from __future__ import annotations

import json
from pathlib import Path

from robustvlm.analysis.selection import (
    ORACLE,
    TRAINING_DOMAIN,
    MeanSE,
    MethodSelection,
    SweepResults,
)
from robustvlm.evaluation.metrics.registry import title
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table, write_page
from robustvlm.report.plots import bar_with_ci

ORACLE_TAG = "ORACLE"


def pct(entry: MeanSE | None) -> str:
    """'mean ± se' in % with one decimal; '—' when absent."""
    if entry is None:
        return "—"
    return f"{100 * entry.mean:.1f} ± {100 * entry.se:.1f}"


def _env_label(results: SweepResults, env: str) -> str:
    return f"{env} (test)" if env in results.test_envs else f"{env} (train)"


def training_domain_table(results: SweepResults) -> Table:
    """Methods x every environment under training-domain validation, test-environment macro mean,
    worst test environment and worst environment overall."""
    envs = [*results.train_envs, *results.test_envs]
    header = [
        "method",
        *(_env_label(results, e) for e in envs),
        "test-env mean",
        "worst test env",
        "worst env (all)",
    ]
    rows = []
    for label, by_rule in results.selection.items():
        s = by_rule[TRAINING_DOMAIN]
        rows.append(
            [
                label,
                *(pct(s.per_env.get(e)) for e in envs),
                pct(s.test_mean),
                pct(s.test_worst),
                pct(s.worst_all),
            ]
        )
    return Table(header, rows)


def oracle_table(results: SweepResults) -> Table:
    """Methods x test environments under the oracle, their macro mean and the worst of them, and
    (on the colour benchmarks) the rule of each picked model, per test environment and seed."""
    header = [
        "method",
        *(f"{e} ({ORACLE_TAG})" for e in results.test_envs),
        f"test-env mean ({ORACLE_TAG})",
        f"worst test env ({ORACLE_TAG})",
    ]
    if results.oracle_rules:
        header.append("rule of the picked models (per seed)")
    rows = []
    for label, by_rule in results.selection.items():
        s = by_rule[ORACLE]
        row = [
            label,
            *(pct(s.per_env.get(e)) for e in results.test_envs),
            pct(s.test_mean),
            pct(s.test_worst),
        ]
        if results.oracle_rules:
            by_env = results.oracle_rules.get(label, {})
            picked = [
                f"{e}: {', '.join(c.rule for c in by_env[e].values())}"
                for e in results.test_envs
                if e in by_env
            ]
            row.append("; ".join(picked) or "—")
        rows.append(row)
    return Table(header, rows)


def _rule_text(results: SweepResults, label: str) -> tuple[str, str]:
    calls = results.rules.get(label)
    if not calls:
        return "—", "—"
    per_seed = ", ".join(f"{calls[str(s)].rule}" for s in results.seeds if str(s) in calls)
    return calls["mean"].rule, per_seed


def headline(results: SweepResults) -> list[Block]:
    """The headline environment under both rules, with the rule each method learned."""
    env = results.headline_env
    if env is None:
        return []
    header = [
        "method",
        f"{env}: training-domain validation",
        f"{env}: {ORACLE_TAG} (test-domain)",
        "worst env (all), training-domain validation",
        "rule learned (seed mean)",
        "rule per seed",
    ]
    rows = []
    for label, by_rule in results.selection.items():
        rule, per_seed = _rule_text(results, label)
        rows.append(
            [
                label,
                pct(by_rule[TRAINING_DOMAIN].per_env.get(env)),
                pct(by_rule[ORACLE].per_env.get(env)),
                pct(by_rule[TRAINING_DOMAIN].worst_all),
                rule,
                per_seed,
            ]
        )
    return [Heading(f"Headline: the `{env}` environment"), Table(header, rows)]


def rules_blocks(results: SweepResults) -> list[Block]:
    """How the learned rule is decided, with each rule's ideal per-environment accuracy."""
    if not results.rules:
        return [
            Heading("Which rule each method learned"),
            Paragraph(
                "Not analysed: the data has no colour manifest (only the built-in colour "
                "benchmarks name the rules a model can learn)."
            ),
        ]
    first = next(iter(results.rules.values()))["mean"]
    return [
        Heading("Which rule each method learned"),
        Paragraph(
            "Each method's per-environment accuracy under training-domain validation (the seed "
            "mean, and each seed's selected model) is compared with the accuracies five pure rules "
            "would score on this benchmark: the colour rule scores each environment's colour "
            "agreement, the anti-colour rule its complement, the content rule (shape or digit, "
            "the invariant one) 1 − label noise everywhere, a constant answer 0.5, a model that "
            "gives neither answer 0. The rule "
            "nearest in Euclidean distance over the environments is the one named. A high "
            "reversed-environment score with chance on the colour-free environment is the "
            "anti-colour rule, not invariance."
        ),
        Table(
            ["method", *(f"distance to {r}" for r in first.distances), "nearest"],
            [
                [label, *(f"{d:.2f}" for d in calls["mean"].distances.values()), calls["mean"].rule]
                for label, calls in results.rules.items()
            ],
        ),
    ]


def reference_blocks(results: SweepResults) -> list[Block]:
    """Published figures beside ours, on the environment they are compared with."""
    ref = results.reference
    if not ref:
        return []
    env = ref["ours_env"]
    rows = []
    for label, by_rule in results.selection.items():
        published = ref["results"].get(
            ref.get("objectives", {}).get(results.methods[label], ""), {}
        )
        rows.append(
            [
                label,
                _num(published.get(TRAINING_DOMAIN)),
                pct(by_rule[TRAINING_DOMAIN].per_env.get(env)),
                _num(published.get(ORACLE)),
                pct(by_rule[ORACLE].per_env.get(env)),
            ]
        )
    return [
        Heading(f"Yardstick: {ref['dataset']} figures of DomainBed"),
        Paragraph(
            f"Source: {ref['source']}. {ref['note']}; printed beside ours (environment `{env}`); "
            "— where the paper has no such method. The oracle columns are test-domain selected."
        ),
        Table(
            [
                "method",
                f"DomainBed {ref['env']}, training-domain validation",
                f"ours {env}, training-domain validation",
                f"DomainBed {ref['env']}, {ORACLE_TAG}",
                f"ours {env}, {ORACLE_TAG}",
            ],
            rows,
        ),
    ]


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def choices_table(results: SweepResults) -> Table:
    """What each rule picked per (method, trial seed): draw and checkpoint step."""
    rows = []
    for label, by_rule in results.selection.items():
        td: MethodSelection = by_rule[TRAINING_DOMAIN]
        oracle: MethodSelection = by_rule[ORACLE]
        for seed in results.seeds:
            c = next(iter(td.choices[seed].values()))
            picks = ", ".join(f"{e}: draw {o.draw}" for e, o in oracle.choices[seed].items())
            rows.append(
                [
                    label,
                    str(seed),
                    f"draw {c.draw}, step {c.step} (held-out {100 * c.score:.1f})",
                    picks,
                ]
            )
    return Table(
        [
            "method",
            "trial seed",
            "training-domain validation picked",
            f"{ORACLE_TAG} picked (last checkpoint)",
        ],
        rows,
    )


def draws_table(results: SweepResults) -> Table:
    """Every hyperparameter draw of every method (draw 0: the defaults)."""
    rows = [
        [
            label,
            str(d),
            f"{h['lr']:.3g}",
            f"{h['weight_decay']:.3g}",
            json.dumps(
                {
                    k: (round(v, 4) if isinstance(v, float) else v)
                    for k, v in h["method_args"].items()
                }
            ),
        ]
        for label, by in results.draws.items()
        for d, h in by.items()
    ]
    return Table(["method", "draw", "lr", "weight decay", "method arguments"], rows)


def bars(results: SweepResults, path: Path) -> Path:
    """Per method and environment, the training-domain-validation accuracy ± SE."""
    labels, means, los, his = [], [], [], []
    for label, by_rule in results.selection.items():
        for env, v in by_rule[TRAINING_DOMAIN].per_env.items():
            labels.append(f"{label} {env}")
            means.append(v.mean)
            los.append(v.mean - v.se)
            his.append(v.mean + v.se)
    return bar_with_ci(
        labels,
        means,
        los,
        his,
        path,
        "training-domain validation: accuracy per environment (± SE over seeds)",
        ylabel=title(results.metric),
    )


def build_blocks(results: SweepResults, out_dir: Path) -> list[Block]:
    """Draw the figure into `out_dir` and return the report's blocks."""
    n_ck = len(results.checkpoints)
    blocks: list[Block] = [
        Heading("robustvlm sweep" + (" — SMOKE TEST" if results.smoke else ""), 1),
        *(
            [
                Paragraph(
                    "Smoke test: a tiny model on built-in data for a few steps, to check the pipeline. "
                    "These numbers are not results."
                )
            ]
            if results.smoke
            else []
        ),
        Paragraph(
            f"Methods: {', '.join(results.methods)}; {len(next(iter(results.draws.values())))} "
            f"hyperparameter draws each (draw 0 = defaults); trial seeds {results.seeds}; "
            f"{results.n_runs} runs; checkpoints evaluated at steps {results.checkpoints} ({n_ck}). "
            f"Training environments: {', '.join(results.train_envs)}; test environments: "
            f"{', '.join(results.test_envs)}. Held out: {100 * results.holdout_fraction:.0f}% of "
            "each environment (a benchmark's own validation split where it has one). "
            f"Accuracy = {title(results.metric)}, in %, mean ± standard error over trial seeds "
            "(DomainBed's: std / √seeds); selection per trial seed."
        ),
        *headline(results),
        Heading("Training-domain validation"),
        Paragraph(
            "Hyperparameters and checkpoint chosen by the held-out accuracy averaged over the "
            "training environments (DomainBed's IIDAccuracySelectionMethod). The test environments "
            "are never looked at. Worst env (all) is the lowest accuracy over every environment, "
            "training ones included, per seed."
        ),
        training_domain_table(results),
        Heading(f"Test-domain validation ({ORACLE_TAG})"),
        Paragraph(
            f"{ORACLE_TAG}: for each test environment, the last checkpoint of every draw, and the "
            "draw with the best accuracy on that environment's held-out part; its accuracy on the "
            "rest is reported (DomainBed's OracleSelectionMethod). It looks at the test "
            "distribution: an upper bound on what selection can reach, not what a user could pick."
        ),
        oracle_table(results),
        *reference_blocks(results),
        *rules_blocks(results),
        Heading("What was picked"),
        choices_table(results),
        Heading("Hyperparameter draws"),
        draws_table(results),
    ]
    path = bars(results, out_dir / "sweep_per_env.png")
    blocks.append(Image(path.name, "per-environment accuracy"))
    return blocks


def write_sweep_report(results: SweepResults, out_dir: str | Path) -> tuple[Path, Path]:
    """Write the figure, report.md and report.html into `out_dir`; returns (md, html) paths."""
    out_dir = Path(out_dir)
    return write_page(build_blocks(results, out_dir), out_dir, title="robustvlm sweep")
