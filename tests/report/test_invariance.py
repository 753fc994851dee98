"""The invariance report."""

from __future__ import annotations

import dataclasses

from robustvlm.data.synth.linear_unit_tests import EXAMPLES
from robustvlm.experiments.invariance.results import InvarianceResults, SpreadVerdict
from robustvlm.linear.protocol import METHODS, Protocol, Selection


def selection(mean=0.5, std=0.0, per_env=(), seeds=(), per_seed=()):
    return Selection(draw=0, config={}, mean=mean, std=std, per_env=list(per_env), validation=0.0, diverged=0,
                     seeds=list(seeds), per_seed=list(per_seed))


def results_of(methods, results, *, reference=None, within_spread=None, protocol=None, **fields):
    """An InvarianceResults of `results` {example: {method: Selection}} and defaults for the rest."""
    return InvarianceResults(budget="quick", seconds=1.0, launcher={"kind": "local", "workers": 1},
                             protocol=protocol or Protocol(), methods=list(methods), results=results,
                             reference=reference, within_spread=within_spread, **fields)


def test_other_settings_show_no_published_figures():
    from robustvlm.experiments.invariance.report import error_table, reference_paragraph

    entry = selection(0.5, 0.1)
    summary = results_of(METHODS, {ex: dict.fromkeys(METHODS, entry) for ex in EXAMPLES},
                         published_settings="n_envs 2 to 10 (dim_inv 5, dim_spu 5); dim_spu 0 to 10 (dim_inv 5, n_envs 3)",
                         protocol=Protocol(n_envs=4, dim_inv=5, dim_spu=2))
    assert {row[1] for row in error_table(summary).rows} == {"ours"}
    text = reference_paragraph(summary).text
    assert "No published row for this setting (4 environments, 5 invariant and 2 spurious" in text
    assert "n_envs 2 to 10" in text and "dim_spu 0 to 10" in text


def _summary(methods, means):
    """A results.json with the published row of 3 environments and 2 spurious dimensions and our
    means {method: {example: mean}}."""
    from robustvlm.linear.published import published_row, spread_verdicts

    row = published_row(3, 5, 2)
    plain = {ex: {m: {"mean": means[m][ex], "std": 0.0} for m in methods} for ex in EXAMPLES}
    verdicts = {ex: {m: SpreadVerdict(**v) for m, v in by.items()} for ex, by in spread_verdicts(plain, row).items()}
    return results_of(methods, {ex: {m: selection(means[m][ex]) for m in methods} for ex in EXAMPLES},
                      reference=row, within_spread=verdicts, protocol=Protocol(n_envs=3, dim_inv=5, dim_spu=2))


def test_the_spread_tables_mark_each_cell_and_count_the_comparable_ones():
    from robustvlm.experiments.invariance.report import spread_grid_table, spread_table

    published = {"Example1": 13.0225, "Example1s": 30.0, "Example2": 0.5, "Example2s": 0.5,
                 "Example3": 0.25, "Example3s": 0.28}
    summary = _summary(["erm", "irm"], {"erm": published, "irm": published})
    rows = {row[0]: row[1:] for row in spread_table(summary).rows}
    assert rows["ERM"][0] == "within (+0.0 sd)" and rows["ERM"][1].startswith("outside (+7.6 sd)")
    assert rows["ERM"][2] == rows["ERM"][3] == "not comparable"  # their Example2 split at dim_spu 2
    assert rows["IRMv1"][0].startswith("outside")  # 13.02 against their IRMv1's 10.88 ± 0.36
    grid = spread_grid_table({"a": summary}).rows
    assert grid[0][:3] == ["3 envs, 2 spurious", "ERM", "13.02 (13.02 ± 2.24) in"]
    assert grid[0][4] == "n.c." and grid[0][-1] == "3 of 4"


def test_birm_rows_say_where_they_fall_short_of_irmv1():
    from robustvlm.experiments.invariance.report import short_of_irm

    irm = dict.fromkeys(EXAMPLES, 0.3)
    summary = _summary(["irm", "birm", "dynamic_birm"],
                       {"irm": irm, "birm": {**irm, "Example3": 0.4}, "dynamic_birm": irm})
    text = short_of_irm(summary).text
    assert "BIRM falls short of IRMv1 (higher mean test error) on Example3." in text
    assert "Dynamic BIRM is at or below IRMv1 on every example." in text
    assert short_of_irm(_summary(["erm"], {"erm": irm})) is None


def test_worst_environment_beside_the_average():
    from robustvlm.experiments.invariance.report import worst_env_table

    results = {ex: {m: selection(0.3, per_env=[0.1, 0.5, 0.3]) for m in METHODS} for ex in EXAMPLES}
    results["Example2"]["irm"] = selection(0.3, per_env=[0.1, float("nan"), 0.2])
    rows = {row[0]: row[1:] for row in worst_env_table(results_of(METHODS, results)).rows}
    assert rows["ERM"][0] == "0.50 / 0.30" and rows["ERM"][2] == "0.500 / 0.300"
    assert rows["IRMv1"][2] == "diverged"


def test_the_reading_names_only_what_ran():
    from robustvlm.experiments.invariance.report import reading_blocks

    irm = dict.fromkeys(EXAMPLES, 0.3)
    text = reading_blocks(_summary(["irm", "birm"], {"irm": irm, "birm": {**irm, "Example3": 0.2}}))[1].text
    assert "Example1: lowest without the oracle: IRMv1 0.30." in text and "Example1: ;" not in text
    assert "Example3: lowest without the oracle: BIRM 0.200." in text
    text = reading_blocks(_summary(["erm", "irm"], {"erm": irm, "irm": {**irm, "Example2": 0.1}}))[1].text
    assert "Example2: ERM 0.300; lowest without the oracle: IRMv1 0.100." in text


def test_the_chart_shows_what_ran_and_what_was_published():
    from dataclasses import replace

    from robustvlm.experiments.invariance.report import chart_rows

    irm = dict.fromkeys(EXAMPLES, 0.3)
    labels = [row[0] for row in chart_rows(_summary(["irm", "irm_eiil"], {"irm": irm, "irm_eiil": irm}))]
    assert labels == ["ERM", "IRMv1", "IRMv1, EIIL environments", "ANDMask", "IGA", "Oracle"]
    summary = replace(_summary(["erm"], {"erm": irm}), reference=None)
    assert chart_rows(summary) == [("ERM", "erm", None)]


def test_the_seed_cells_and_the_verdict_come_from_the_per_seed_errors():
    import math

    from robustvlm.experiments.invariance.report import seeds_cell, verdict_blocks

    # two seeds 1 and 3: mean 2, sd sqrt(2); resampled means 1, 2 or 3, the extremes each with p 1/4
    assert seeds_cell([1.0, 3.0], 2) == "1.00, 3.00: 2.00 ± 1.41 [1.00, 3.00]"
    assert seeds_cell([0.25], 3) == "0.250" and seeds_cell([0.2, math.nan], 3) == "diverged"
    per_seed = {"erm": [13.0, 14.0], "irm": [10.0, 11.0], "oracle": [1.0, 1.0]}
    summary = results_of(per_seed, {ex: {m: selection(seeds=[0, 1], per_seed=v) for m, v in per_seed.items()}
                                    for ex in EXAMPLES})
    text = [b.text for b in verdict_blocks(summary)]
    assert text[0] == "Verdict"
    # a quick run says only that it is a smoke test (issue 56.3); a full one the conclusion, then the detail
    assert summary.quick and text[1].startswith("Quick run: a smoke test. It checked that each of ") and text[2:] == ["What ran"]
    text = [b.text for b in verdict_blocks(dataclasses.replace(summary, budget="default"))]
    assert text[1] == "IRMv1 beat ERM by more than the seed spread on at least one example (the detail follows)."
    assert text[3].startswith("IRMv1 beat ERM on Example1 (10.50 against 13.50, 3.00 better, seed sd up to 0.707; "
                              "better in 2 of 2 seeds)")
    assert all("Oracle" not in line for line in text)


def test_results_json_reads_back_into_the_same_results(tmp_path):
    import json
    import math

    from robustvlm.experiments.invariance.results import LambdaExtremes

    summary = replace_lambdas(_summary(["erm", "irm"], {"erm": dict.fromkeys(EXAMPLES, 0.3),
                                                         "irm": dict.fromkeys(EXAMPLES, math.inf)}))
    text = json.dumps(summary.to_dict(), allow_nan=True)
    back = InvarianceResults.from_dict(json.loads(text))
    assert back == summary and back.to_dict() == summary.to_dict()
    assert json.loads(text)["lambda"]["Example1"] == {"largest_lambda": 8.0, "R_inv_min": None}
    old = json.loads(text)
    old["lambda"]["Example1"] = {"lambda_max": 8.0, "R_inv_min": 0.5}  # a results.json from before the rename
    assert InvarianceResults.from_dict(old).lambdas["Example1"] == LambdaExtremes(8.0, 0.5)


def replace_lambdas(summary):
    from dataclasses import replace

    from robustvlm.experiments.invariance.results import LambdaExtremes

    return replace(summary, lambdas={"Example1": LambdaExtremes(8.0, None)}, purity={"Example1": 0.5})
