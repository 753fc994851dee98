"""Two reward-model losses of a generalization matrix compared pair by pair: every run of `base`
against the run of `other` with the same seed and training environment, on the same scored test
pairs (`MatrixRun.rows`: each run's eval/pairs.jsonl), correctness r_chosen > r_rejected in the
run's own view (a tie counts as wrong, as in accuracy).

A question is one (training environment, test pair) cell entry; it is i.i.d. where the pair's
environment is the training one, o.o.d. otherwise. Pooled over seeds and clustered by the test
pair (a pair is scored by the models of every training environment, so its questions are
resampled together): `analysis.study_paired.paired_verdict`, beside the across-seed count, with
the questions a difference of the observed size (at least MIN_MARGIN) needs at 80% power.
"""

from __future__ import annotations

from collections.abc import Sequence

from robustvlm.analysis.reward_matrix import MatrixResults, MatrixRun, compare_labels
from robustvlm.analysis.study_paired import PairedVerdict, paired_verdict, study_paired

METRIC = "correct"
MIN_MARGIN = 0.01  # the power line sizes for at least one point
SEPARATOR = ">"  # question id: "<training env>><pair id>"


def _rows(runs: Sequence[MatrixRun], label: str) -> dict[str, list[dict]]:
    """{seed: rows} of `label`'s runs, one row per (training environment, scored test pair)."""
    rows: dict[str, list[dict]] = {}
    for run in runs:
        if run.label != label:
            continue
        correct = run.correct()
        rows.setdefault(str(run.seed), []).extend(
            {"id": f"{run.train_env}{SEPARATOR}{r['id']}", "env": "iid" if r["env"] == run.train_env else "ood",
             "scores": {METRIC: int(correct[r["id"]])}} for r in run.rows)
    return rows


def reward_paired(runs: Sequence[MatrixRun], base: str, other: str, *, n_boot: int = 2000) -> dict[str, PairedVerdict]:
    """{"iid" | "ood" | "all": `other` against `base`} pooled over seeds and training environments
    (module doc); empty when either label has no runs."""
    rows = {base: _rows(runs, base), other: _rows(runs, other)}
    if not rows[base] or not rows[other]:
        return {}
    found = study_paired(rows, base, metrics=(METRIC,), n_boot=n_boot,
                         cluster=lambda question: question.partition(SEPARATOR)[2])
    return {group: paired_verdict(paired, MIN_MARGIN) for group, paired in found[other][METRIC].items()}


def compare_losses(results: MatrixResults, runs: Sequence[MatrixRun], base: str, other: str, *,
                   n_boot: int = 2000) -> dict[str, dict | None]:
    """`analysis.reward_matrix.compare_labels` (seed by seed) with "paired": `reward_paired` as
    dicts (`PairedVerdict.to_dict`): the demos' comparison of two losses."""
    paired = reward_paired(runs, base, other, n_boot=n_boot)
    return {**compare_labels(results, base, other), "paired": {g: v.to_dict() for g, v in paired.items()}}
