"""The reward demo's report: the verdict (`experiments.reward.verdict`), setup, the matrix section and
the Best-of-N curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from robustvlm.analysis.reward_matrix import MatrixResults
from robustvlm.experiments.reward.results import BonResult, RewardDemoPlan
from robustvlm.experiments.reward.verdict import reward_verdict
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table
from robustvlm.report.reward_report import (
    bon_curves,
    cell_tables,
    matrix_blocks,
    pct,
    sfd_cells_text,
    sfd_table,
)
from robustvlm.report.smoke import smoke_verdict
from robustvlm.reward.ladder_results import LinearProxy, LinearRung, MatrixRung, ProxyWeights


def bon_table(bon: Mapping[str, BonResult]) -> Table:
    """Per reward model: gold at N = 1 and N = K, mean ± sd over seeds."""
    rows = [[label, pct(r.at_1), pct(r.at_k)] for label, r in bon.items()]
    k = next(iter(bon.values())).curve[-1]["n"]
    return Table(["reward model", "gold at N = 1 (×100)", f"gold at N = {k} (×100)"], rows)


def demo_blocks(
    results: MatrixResults,
    comparison: Mapping[str, Mapping | None],
    bon: Mapping[str, BonResult],
    out_dir: Path,
    *,
    points: Mapping[str, Sequence],
    plan: RewardDemoPlan,
    seconds: float,
    bon_setup: tuple[str, str],
    quick: bool = False,
) -> list[Block]:
    """Every block of the demo page (figures written into `out_dir`); a `quick` run's verdict says
    only that it is a smoke test (`report.smoke`)."""
    train_env, test_env = bon_setup
    cells = ", ".join(f"`{label}` {sfd_cells_text(results, label)}" for label in ("standard", "shortcut_aware"))
    verdict: list[Block] = (smoke_verdict("every loss trained on every environment and was tested on all of them, the "
                             "Best-of-N policy sampled and each rung of the reward ladder ran") if quick
               else [Heading("Verdict"), *(Paragraph(line) for line in reward_verdict(comparison, sfd_cells=cells))])
    blocks: list[Block] = list(verdict)
    blocks += [Paragraph(
        f"Built-in `preferences` benchmark ({plan.n_per_env} training pairs per environment; "
        f"environments `clause`, `long`, `short`, `plain`, whose text cues predict the preference only "
        f"inside them). A tiny Idefics3 was fine-tuned for {plan.policy_steps} steps to describe the "
        f"training images; it is the Best-of-N policy and the initial weights of every reward model. "
        f"Each loss trained {plan.rm_steps} steps (batch 8 pairs) on one environment and was tested on "
        f"{plan.test_per_env} test pairs of every environment, for {len(plan.seeds)} seed(s). "
        + ("Accuracies are in %, mean ± std over seeds; differences are paired by seed. "
           if len(plan.seeds) > 1 else "Accuracies are in %, from one seed (no spread). ")
        + f"Wall time: {seconds:.0f} s.")]
    blocks += matrix_blocks(results, out_dir, points=points)
    figure = bon_curves({label: r.curve for label, r in bon.items()}, out_dir / "bon.png", gold="chrF")
    blocks += [Heading("Best-of-N"), Paragraph(
        f"The policy sampled K candidates (temperature 1.0, top-p 0.95) for `{test_env}` test prompts "
        f"(no text cue); the standard and shortcut-aware models trained on `{train_env}` (a length "
        "shortcut) picked the best of N. Gold: chrF of the pick against the reference answer (0-1, ×100 "
        "in the table), mean over prompts, exact unbiased estimator over the K candidates; curves "
        + ("averaged over seeds, the table gives mean ± std over seeds." if len(plan.seeds) > 1 else
           "from one seed.")), Image(figure.name, "Best-of-N curves"),
        bon_table(bon)]
    return blocks


def _spread_text(values: Sequence[float | None], scale: float = 100.0, digits: int = 1) -> str:
    """"mean ± sd" of the defined values ("mean" alone for one; "—" for none), times `scale`."""
    defined = [v for v in values if v is not None]
    if not defined:
        return "—"
    mean = f"{scale * float(np.mean(defined)):.{digits}f}"
    return mean if len(defined) == 1 else f"{mean} ± {scale * float(np.std(defined, ddof=1)):.{digits}f}"


def linear_rung_blocks(rung: LinearRung) -> list[Block]:
    """The reward ladder's linear rung (`experiments.reward.linear_rung`): per loss, the image feature's share
    of the weight, accuracy in training and o.o.d., and SFD; the proxy's accuracy and the SFC weights."""
    table = [[loss, _spread_text(r.image_share), _spread_text(r.train_accuracy),
              _spread_text(r.ood_accuracy), _spread_text(r.sfd)]
             for loss, r in rung.losses.items()]
    proxy = rung.proxy
    return [
        Heading("Rung 1: linear rewards on two features"),
        Paragraph("The same losses on a linear reward over two feature differences per pair: an image "
                  "feature that favours the chosen response everywhere (noisily) and a text cue that agrees "
                  "with the preference 95% of the time in training and 50% at test. Seeds: "
                  f"{len(proxy.ood_accuracy)}; values in %."),
        Table(["loss", "image feature's share of the weight", "train accuracy", "o.o.d. accuracy",
               "SFD (points)"], table),
        Paragraph(f"The text-only proxy's o.o.d. accuracy: {_spread_text(proxy.ood_accuracy)}; SFC weights in "
                  f"training: mean {_spread_text([d['mean'] for d in proxy.sfc], 1.0, 2)}, share above 0.5 "
                  f"{_spread_text([d['above_half'] for d in proxy.sfc])}%."),
    ]


LADDER_LOSSES = ("standard", "text_only", "shortcut_aware")
SFC_KEYS = ("proxy_wrong", "weight_proxy_wrong", "mean_proxy_wrong", "mean_proxy_right", "above_half")


def _ladder_losses(linear: LinearRung, frozen: MatrixRung, full: MatrixRung) -> list[tuple[str, dict]]:
    """[(rung, {loss: {"iid", "ood", "sfd": per-seed lists, "cells": (defined, scored)}})]: the
    linear rung's one o.o.d. environment is one cell per seed."""
    rungs = [("1 linear", {loss: {"iid": r.train_accuracy, "ood": r.ood_accuracy, "sfd": r.sfd,
                                  "cells": (sum(v is not None for v in r.sfd), len(r.sfd))}
                           for loss, r in linear.losses.items() if loss in LADDER_LOSSES})]
    for rung, matrix in (("2 frozen backbone", frozen.matrix), ("3 full model", full.matrix)):
        losses = {}
        for loss in LADDER_LOSSES:
            averages, sfd, cells = matrix.averages[loss], matrix.sfd_average.get(loss), matrix.sfd_cells.get(loss)
            iid, ood = averages["iid"], averages["ood"]
            assert iid is not None and ood is not None, f"{rung}: {loss} has no i.i.d. or o.o.d. cells"
            losses[loss] = {"iid": iid["values"], "ood": ood["values"],
                            "sfd": sfd["values"] if sfd else [],
                            "cells": (sum(cells["defined"]), sum(cells["cells"])) if cells else None}
        rungs.append((rung, losses))
    return rungs


def ladder_tables(linear: LinearRung, frozen: MatrixRung, full: MatrixRung) -> tuple[Table, Table]:
    """The three-rung reward table and the proxy / SFC-weight table.

    `linear`: `experiments.reward.linear_rung`; `frozen`: `experiments.reward.frozen_rung`; `full`: the demo's matrix and
    the weights its shortcut-aware runs logged (`workflows.reward.matrix.logged_proxy`).
    """
    rows = []
    for rung, losses in _ladder_losses(linear, frozen, full):
        base = losses["standard"]
        for loss, r in losses.items():
            paired = "—"
            if loss == "shortcut_aware":
                paired = ", ".join(f"{100 * (a - b):+.1f}" for a, b in zip(r["ood"], base["ood"]))
            cells = "—" if loss == "text_only" or r["cells"] is None else f"{r['cells'][0]} of {r['cells'][1]}"
            rows.append([rung, loss, _spread_text(r["iid"]), _spread_text(r["ood"]),
                         "—" if loss == "text_only" else _spread_text(r["sfd"]), cells, paired])
    losses_table = Table(["rung", "loss", "i.i.d. accuracy", "o.o.d. accuracy", "mean SFD (points)",
                          "o.o.d. cells with SFD", "o.o.d. minus standard, per seed (points)"], rows)
    sfc_rows = []
    proxies: tuple[tuple[str, LinearProxy | ProxyWeights], ...] = (
        ("1 linear", linear.proxy), ("2 frozen backbone", frozen.proxy), ("3 full model", full.proxy))
    for rung, proxy in proxies:
        per_key = {k: [d[k] for d in proxy.sfc] for k in ("mean", *SFC_KEYS)}
        sfc_rows.append([rung, _spread_text(proxy.train_accuracy), _spread_text(per_key["proxy_wrong"]),
                         _spread_text(per_key["weight_proxy_wrong"]),
                         _spread_text(per_key["mean_proxy_wrong"], 1.0, 2),
                         _spread_text(per_key["mean_proxy_right"], 1.0, 2), _spread_text(per_key["above_half"])])
    sfc_table = Table(["rung", "proxy's training accuracy", "training pairs the proxy ranks wrong",
                       "their share of the summed SFC weight", "mean SFC on them", "mean SFC on the rest",
                       "pairs weighted above 0.5"], sfc_rows)
    return losses_table, sfc_table


def ladder_blocks(linear: LinearRung, frozen: MatrixRung, full: MatrixRung, *, frozen_setup: str) -> list[Block]:
    """The reward ladder section: what each rung is, and `ladder_tables`."""
    losses_table, sfc_table = ladder_tables(linear, frozen, full)
    return [
        Heading("The reward ladder: three rungs, the same losses"),
        Paragraph("Rung 1: linear rewards on a synthetic image feature and text cue (above; its i.i.d. column "
                  "is training accuracy). Rung 2: a reward head on the frozen policy backbone, trained on the "
                  f"backbone's hidden states ({frozen_setup}), per training environment of `preferences`, "
                  "tested on every environment. Rung 3: the full reward models of the matrix above. "
                  "Accuracies in %, mean ± sd over seeds; SFD per o.o.d. cell against the text-only model of "
                  "the same seed and environment, averaged over the cells where it is defined."),
        losses_table,
        Paragraph("Where the shortcut-failure weights fell in training: the proxy's accuracy on its training "
                  "pairs, the share of pairs it ranks wrong (where the shortcut fails), the share of the summed "
                  "SFC weight those pairs get (equal to their share of pairs when every weight is the same), "
                  "the mean SFC on them and on the rest, and the share of pairs weighted above 0.5 (%, "
                  "SFC as fractions). Rungs 1 and 2: every training pair under the final weights; rung 3: "
                  "the logged batches of the second half of training."),
        sfc_table,
        Paragraph("Rung 3 run by run: the shortcut-aware run's proxy-wrong pairs, their share of the SFC "
                  "weight and its ratio to their share of the pairs (1: uniform weights), beside the run's "
                  "o.o.d. accuracy minus the standard run's of the same seed and environment (points)."),
        full_runs_table(full),
        *rung_cells(frozen),
    ]


def _row_ood(matrix: MatrixResults, label: str, env: str, index: int) -> float:
    """Mean accuracy of `label`'s model trained on `env` (seed number `index`) over the other
    test environments: its row of the matrix off the diagonal."""
    return float(np.mean([matrix.cells[label][f"{env}->{test}"]["values"][index]
                          for test in matrix.test_envs if test != env]))


def full_runs_table(full: MatrixRung) -> Table:
    """Per shortcut-aware run of the matrix (`full.proxy.runs`): where its logged SFC weights
    fell and its o.o.d. gain over the standard run of the same seed and environment (mean over
    the o.o.d. cells of that row of the matrix)."""
    matrix = full.matrix
    rows = []
    for run in full.proxy.runs or []:
        index, env = matrix.seeds.index(run.seed), run.env
        gain = _row_ood(matrix, "shortcut_aware", env, index) - _row_ood(matrix, "standard", env, index)
        wrong, weight = run.sfc["proxy_wrong"], run.sfc["weight_proxy_wrong"]
        ratio = f"{weight / wrong:.2f}" if wrong and weight is not None else "—"
        rows.append([str(run.seed), env, _spread_text([wrong]), _spread_text([weight]), ratio, f"{100 * gain:+.1f}"])
    return Table(["seed", "trained on", "pairs the proxy ranks wrong", "their share of the SFC weight",
                  "ratio", "o.o.d. minus standard (points)"], rows)


def rung_cells(frozen: MatrixRung) -> list[Block]:
    """Rung 2's matrices and SFD per o.o.d. cell (rung 3's are in the matrix section)."""
    results = frozen.matrix
    table = sfd_table(results)
    sfd: list[Block] = [Paragraph("Rung 2's SFD per o.o.d. cell (points) and the correlation of the heads' reward "
                                  "differences with the text-only head's:"), table] if table is not None else []
    return [Paragraph("Rung 2, per cell (rows: trained on; columns: tested on):"), *cell_tables(results), *sfd]


def seeds_table(full: MatrixRung, *, base: str = "standard", other: str = "shortcut_aware") -> Table:
    """Seed by seed (`full` as for `full_runs_table`): o.o.d. accuracy of `base` and `other` and
    their difference, the mean SFD of each, and where `other`'s logged SFC weights fell, pooled
    over its runs (proxy-wrong pairs, their share of the weight, its ratio to uniform); a last
    row gives mean ± sd over seeds (% and points)."""
    matrix, pooled = full.matrix, full.proxy.sfc
    n = len(matrix.seeds)

    def per_seed(section: str, label: str, key: str | None = None) -> list[float | None]:
        entry = getattr(matrix, section).get(label)
        entry = entry if key is None or entry is None else entry[key]
        return list(entry["values"]) if entry is not None else [None] * n

    ood_base, ood_other = per_seed("averages", base, "ood"), per_seed("averages", other, "ood")
    gain = [b - a if a is not None and b is not None else None for a, b in zip(ood_base, ood_other)]
    wrong, weight = [s["proxy_wrong"] for s in pooled], [s["weight_proxy_wrong"] for s in pooled]
    ratio = [w / p if p and w is not None else None for p, w in zip(wrong, weight)]
    columns = [ood_base, ood_other, gain, per_seed("sfd_average", base), per_seed("sfd_average", other), wrong, weight]
    rows = [[str(seed), *(_spread_text([c[i]]) for c in columns), _spread_text([ratio[i]], 1.0, 2)]
            for i, seed in enumerate(matrix.seeds)]
    for row, value in zip(rows, gain):
        row[3] = "—" if value is None else f"{100 * value:+.1f}"
    rows.append(["mean ± sd", *(_spread_text(c) for c in columns), _spread_text(ratio, 1.0, 2)])
    return Table(["seed", f"{base} o.o.d.", f"{other} o.o.d.", "o.o.d. difference (points)",
                  f"{base} mean SFD (points)", f"{other} mean SFD (points)", "pairs the proxy ranks wrong",
                  "their share of the SFC weight", "ratio"], rows)
