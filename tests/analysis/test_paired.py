"""Paired statistics against statsmodels and scipy, and `robustvlm compare` on hand-written runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.power import TTestPower

from robustvlm.analysis.paired import (
    cluster_bootstrap_ci,
    clustered_se,
    compare_paired,
    mcnemar_exact,
    questions_needed,
)
from robustvlm.cli import main
from robustvlm.errors import DataError

RNG = np.random.default_rng(7)
A = RNG.random(60) < 0.7
B = RNG.random(60) < 0.55
GROUPS = np.repeat(np.arange(15), 4)  # 15 images, 4 questions each


def test_clustered_se_matches_statsmodels_cluster_robust_ols():
    d = A.astype(float) - B.astype(float)
    fit = OLS(d, np.ones((d.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": GROUPS})
    assert clustered_se(d, GROUPS) == pytest.approx(fit.bse[0], rel=1e-10)
    assert clustered_se(d) == pytest.approx(stats.sem(d), rel=1e-10)


def test_exact_mcnemar_matches_statsmodels():
    only_a, only_b, p = mcnemar_exact(A, B)
    table = [[int(np.sum(A & B)), only_a], [only_b, int(np.sum(~A & ~B))]]
    assert p == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-10)
    assert mcnemar_exact([True, False], [True, False]) == (0, 0, 1.0)


@pytest.mark.parametrize(("delta", "sd"), [(0.05, 0.6), (0.1, 0.5), (0.3, 1.0)])
def test_questions_needed_matches_statsmodels_ttest_power(delta, sd):
    expected = TTestPower().solve_power(effect_size=delta / sd, alpha=0.05, power=0.8)
    assert questions_needed(delta, sd) == pytest.approx(expected, rel=1e-6)
    assert questions_needed(delta, sd, design_effect=2.0) == pytest.approx(2 * expected, rel=1e-6)
    assert questions_needed(delta, 0.0) is None


def test_cluster_bootstrap_resamples_whole_clusters():
    d = A.astype(float) - B.astype(float)
    lo, hi = cluster_bootstrap_ci(d, GROUPS, n_boot=500, seed=3)
    rng = np.random.default_rng(3)  # the same draws, by hand
    draws = rng.integers(0, 15, size=(500, 15))
    boots = [np.concatenate([d[GROUPS == g] for g in row]).mean() for row in draws]
    assert (lo, hi) == pytest.approx(tuple(np.quantile(boots, [0.025, 0.975])))


def test_compare_paired_reads_binary_and_continuous_scores():
    binary = compare_paired(A.astype(float), B.astype(float), clusters=GROUPS, n_boot=200)
    assert binary.difference == pytest.approx(A.mean() - B.mean()) and binary.clusters == 15
    assert binary.only_a == int(np.sum(A & ~B)) and binary.mcnemar_p is not None
    assert binary.ci_lo <= binary.difference <= binary.ci_hi
    scores = compare_paired(RNG.random(20), RNG.random(20), n_boot=200)
    assert scores.only_a is None and scores.mcnemar_p is None
    with pytest.raises(DataError, match="same non-empty questions"):
        compare_paired([1.0, 0.0], [1.0])


def _eval_run(folder, correct_by_env):
    folder.mkdir()
    rows = [{"id": f"{env}-{i}", "env": env, "ood": env == "shifted", "instruction": "q", "prediction": "p",
             "target": "t", "scores": {"exact": float(c), "chrf": 0.5 * c}, "image": f"img{i // 2}"}
            for env, values in correct_by_env.items() for i, c in enumerate(values)]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_compare_command_prints_and_writes_the_paired_table(tmp_path, capsys):
    a = _eval_run(tmp_path / "a", {"clean": [1, 1, 1, 0, 1, 1], "shifted": [1, 0, 1, 1, 0, 1]})
    b = _eval_run(tmp_path / "b", {"clean": [1, 0, 1, 0, 0, 1], "shifted": [0, 0, 1, 1, 0, 0]})
    assert main(["compare", str(a), str(b)]) == 2  # two metrics: which one?
    assert "pass --metric, one of chrf, exact" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--metric", "exact", "--cluster", "image", "--n-boot", "200",
                 "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "| clean |" in printed and "| shifted |" in printed and "| all |" in printed
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    clean = saved["groups"]["clean"]
    assert clean["difference"] == pytest.approx(5 / 6 - 3 / 6) and (clean["only_a"], clean["only_b"]) == (2, 0)
    assert saved["groups"]["all"]["clusters"] == 3 and saved["cluster"] == "image"
    # issue 45.2: a second comparison into the folder is refused (it replaced the first one)
    assert main(["compare", str(a), str(b), "--metric", "exact", "--out", str(tmp_path / "cmp")]) == 2
    assert "--resume" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # not its folder: refused while parsing, before any work
        main(["compare", str(a), str(b), "--metric", "exact", "--out", str(a)])
    assert refused.value.code == 2
    assert "holds files robustvlm did not write" in capsys.readouterr().err


def test_compare_refuses_runs_on_different_questions(tmp_path, capsys):
    a = _eval_run(tmp_path / "a", {"clean": [1, 0, 1]})
    b = _eval_run(tmp_path / "b", {"clean": [1, 0]})
    assert main(["compare", str(a), str(b), "--metric", "exact"]) == 2
    err = capsys.readouterr().err
    assert "do not hold the same questions" in err and "Traceback" not in err
    assert main(["compare", str(a), str(a), "--metric", "exact", "--cluster", "nosuch"]) == 2
    assert "--cluster 'nosuch'" in capsys.readouterr().err


def test_compare_mc_question_files_pairs_rotations(tmp_path, capsys):
    def bench(path, correct):
        rows = [{"id": f"q{i // 2}", "rotation": i % 2, "answer": 0, "prediction": 0 if c else 1, "correct": c}
                for i, c in enumerate(correct)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    a = bench(tmp_path / "a.jsonl", [True, True, False, True, True, True])
    b = bench(tmp_path / "b.jsonl", [True, False, False, False, True, True])
    assert main(["compare", str(a), str(b), "--cluster", "id", "--n-boot", "200"]) == 0
    printed = capsys.readouterr().out
    assert "metric: correct" in printed and "2 / 0" in printed
