"""`experiments.ladder.report.ladder_seeds_table`: the ladder's colour-free accuracy seed by seed against ERM."""

from __future__ import annotations

from robustvlm.experiments.ladder.readings import COLOUR_FREE, READINGS, MethodSummary, Stats, stats
from robustvlm.experiments.ladder.report import ladder_seeds_table

CELL = "fashion/vlm:full:zoo:m"


def entry(final: dict[int, float], oracle: dict[int, float]) -> MethodSummary:
    by = {"final": final, "oracle": oracle, "training-domain": final}
    readings = {r: {COLOUR_FREE: stats(list(by[r].values()), list(by[r]))} for r in READINGS}
    return MethodSummary(len(final), 0, readings, Stats(None, None, 0))


def test_each_seed_is_compared_with_erms_same_seed_and_the_wins_counted() -> None:
    summary = {CELL: {
        "dynamic_birm": entry({3: 0.56, 10: 0.52, 4: 0.60}, {3: 0.56, 10: 0.55, 4: 0.61}),
        "erm": entry({3: 0.55, 10: 0.53, 4: 0.60}, {3: 0.57, 10: 0.54, 4: 0.60}),
    }}
    table = ladder_seeds_table(summary)
    assert table.header == ["rung", "seed", "ERM (final)", "ERM (oracle)", "Dynamic BIRM (final)",
                            "Dynamic BIRM (oracle)"]
    # seeds in numeric order (10 after 4); "+" only where strictly above ERM's same seed
    assert table.rows == [
        [CELL, "3", "55.0", "57.0", "56.0 +", "56.0"],
        [CELL, "4", "60.0", "60.0", "60.0", "61.0 +"],
        [CELL, "10", "53.0", "54.0", "52.0", "55.0 +"],
        [CELL, "beats ERM in", "", "", "1 of 3", "2 of 3"],
    ]


def test_a_method_missing_a_seed_reads_na_and_counts_only_its_seeds() -> None:
    summary = {CELL: {"erm": entry({0: 0.5, 1: 0.5}, {0: 0.5, 1: 0.5}),
                      "irm": entry({1: 0.6}, {1: 0.6})}}
    rows = ladder_seeds_table(summary).rows
    assert rows[0][4:] == ["n/a", "n/a"] and rows[1][4:] == ["60.0 +", "60.0 +"]
    assert rows[2][4:] == ["1 of 1", "1 of 1"]


def test_a_quick_ladder_verdict_says_only_that_it_is_a_smoke_test() -> None:
    """Issue 56.3: a quick run's verdict said "nothing can be concluded", then who tied whom."""
    from report_checks import FINDING

    from robustvlm.experiments.ladder.report import verdict_blocks

    summary = {CELL: {"erm": entry({0: 0.5}, {0: 0.5}), "irm": entry({0: 0.6}, {0: 0.6})}}
    text = [block.text for block in verdict_blocks(summary, quick=True)]
    assert text[0] == "Verdict" and text[2] == "What ran" and len(text) == 3
    assert text[1].startswith("Quick run: a smoke test. It checked that every method trained on every rung")
    assert CELL in text[1] and not FINDING.findall(text[1])
    full = [block.text for block in verdict_blocks(summary)]
    assert full[1].startswith("Not established: no headline difference is decided")  # issue 55.3's rule first
    assert full[2] == "One seed only: nothing can be concluded about any method against ERM."
