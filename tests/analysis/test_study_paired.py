"""The study's per-environment paired comparison on correctness, against statsmodels / scipy and
`analysis.paired` computed by hand on hand-written runs; its place in results.json and the report."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.power import TTestPower

from robustvlm.analysis.paired import compare_paired
from robustvlm.analysis.study import MethodRuns, StudyResults, aggregate_study
from robustvlm.analysis.study_paired import ALL, study_paired
from robustvlm.report.page import Table, to_markdown
from robustvlm.report.study_report import paired_blocks, verdict_blocks

RNG = np.random.default_rng(11)
ENVS = {"a": False, "b": False, "c": True}
N = 30  # questions per environment


def _rows(correct: dict[str, np.ndarray], cee: dict[str, list] | None = None) -> list[dict]:
    return [{"id": f"{env}{i}", "env": env, "ood": ENVS[env], "prediction": "p", "target": "t", "instruction": "q",
             "scores": {"chrf": 0.5, "exact": float(c), **({"cee": cee[env][i]} if cee else {})}}
            for env, values in correct.items() for i, c in enumerate(values)]


def _draw(p: float) -> dict[str, np.ndarray]:
    return {env: RNG.random(N) < p for env in ENVS}


ERM, NEW = _draw(0.4), _draw(0.6)


def test_one_seed_matches_statsmodels_per_environment_and_over_all():
    paired = study_paired({"erm": {0: _rows(ERM)}, "new": {0: _rows(NEW)}}, "erm", n_boot=300)
    assert list(paired) == ["new"] and list(paired["new"]) == ["exact"]  # chrF is not 0/1
    groups = paired["new"]["exact"]
    assert list(groups) == ["a", "b", "c", ALL]
    for env in [*ENVS, ALL]:
        a = np.concatenate(list(NEW.values())) if env == ALL else NEW[env]
        b = np.concatenate(list(ERM.values())) if env == ALL else ERM[env]
        c = groups[env].comparison
        assert c.n == a.size and c.difference == pytest.approx(a.mean() - b.mean())
        assert c.se == pytest.approx(stats.sem(a.astype(float) - b.astype(float)))
        table = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
        assert c.mcnemar_p == pytest.approx(mcnemar(table, exact=True).pvalue)
        assert groups[env].seed_mcnemar["0"] == (table[0][1], table[1][0], pytest.approx(c.mcnemar_p))
        sd = np.std(a.astype(float) - b.astype(float), ddof=1)
        assert c.questions_needed == pytest.approx(TTestPower().solve_power(0.05 / sd, alpha=0.05, power=0.8),
                                                   rel=1e-6)


def test_seeds_are_paired_within_a_seed_then_averaged_per_question():
    erm1, new1 = _draw(0.4), _draw(0.6)
    rows = {"erm": {0: _rows(ERM), 1: _rows(erm1)}, "new": {0: _rows(NEW), 1: list(reversed(_rows(new1)))}}
    got = study_paired(rows, "erm", n_boot=300)["new"]["exact"]["c"]
    a = (NEW["c"].astype(float) + new1["c"]) / 2
    b = (ERM["c"].astype(float) + erm1["c"]) / 2
    order = sorted(range(N), key=lambda i: f"c{i}")  # questions in the order of their ids
    direct = compare_paired(a[order], b[order], n_boot=300)
    assert got.comparison == direct and direct.mcnemar_p is None  # averaged scores are not 0/1
    for seed, (x, y) in {"0": (NEW["c"], ERM["c"]), "1": (new1["c"], erm1["c"])}.items():
        only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
        p = stats.binomtest(only_a, only_a + only_b, 0.5).pvalue
        assert got.seed_mcnemar[seed] == (only_a, only_b, pytest.approx(p))


def test_undecided_cee_is_left_out_and_counted():
    cee_erm = {env: [1, 0, None] * (N // 3) for env in ENVS}
    cee_new = {env: [1, None, 1] * (N // 3) for env in ENVS}
    got = study_paired({"erm": {0: _rows(ERM, cee_erm)}, "new": {0: _rows(NEW, cee_new)}}, "erm", n_boot=200)
    cee = got["new"]["cee"]
    assert cee["a"].undecided == 2 * N // 3 and cee["a"].comparison.n == N // 3
    assert cee[ALL].undecided == 2 * N and cee["a"].comparison.difference == pytest.approx(0.0)


def test_results_json_and_report_carry_the_paired_figures():
    scores = aggregate_study({"erm": {0: _rows(ERM)}, "new": {0: _rows(NEW)}}, ["chrf", "exact"])
    runs = {label: MethodRuns(label, {}, {}) for label in ("erm", "new")}
    saved = StudyResults(scores=scores, runs=runs, seeds=[0], absent={}).to_dict()
    figures = saved["paired"]["new"]["exact"]["c"]
    assert figures == scores.paired["new"]["exact"]["c"].to_dict() and list(saved["paired"]) == ["new"]
    assert figures["mcnemar_per_seed"]["0"]["p"] == pytest.approx(figures["mcnemar_p"])
    blocks = paired_blocks(scores)
    table = next(b for b in blocks if isinstance(b, Table))
    c_row = next(r for r in table.rows if r[2] == "c (OOD)")
    c = scores.paired["new"]["exact"]["c"].comparison
    assert c_row[6] == f"{c.difference:+.4f}" and c_row[10] == f"{c.mcnemar_p:.3g}"
    assert "Paired comparison with erm" in to_markdown(blocks)


def test_report_gives_each_seeds_mcnemar_with_several_seeds():
    erm1, new1 = _draw(0.4), _draw(0.6)
    scores = aggregate_study({"erm": {0: _rows(ERM), 1: _rows(erm1)}, "new": {0: _rows(NEW), 1: _rows(new1)}},
                             ["exact"])
    table = next(b for b in paired_blocks(scores) if isinstance(b, Table))
    a_row = next(r for r in table.rows if r[2] == "a")
    tests = scores.paired["new"]["exact"]["a"].seed_mcnemar
    assert a_row[9] == f"s0: {tests['0'][0]} / {tests['0'][1]}; s1: {tests['1'][0]} / {tests['1'][1]}"
    assert a_row[10] == f"s0: {tests['0'][2]:.3g}; s1: {tests['1'][2]:.3g}"


def test_the_verdict_counts_what_the_paired_test_over_examples_separates():
    erm, new = {s: _draw(0.1) for s in (0, 1)}, {s: _draw(0.9) for s in (0, 1)}  # exact: far apart; chrF: equal
    scores = aggregate_study({"erm": {s: _rows(erm[s]) for s in erm}, "new": {s: _rows(new[s]) for s in new}},
                             ["chrf", "exact"])
    tests = [(split, metric, t) for split, by_metric in scores.significance["new"].items()
             for metric, t in by_metric.items() if t is not None]
    apart = [f"new {split.upper()} {metric}" for split, metric, t in tests if t.ci[0] > 0 or t.ci[1] < 0]
    text = to_markdown(verdict_blocks(scores))
    assert f"{len(apart)} of {len(tests)} differences with erm have a 95% interval excluding zero" in text
    assert len(apart) == 2 and all(name.lower() in text.lower() for name in apart)
