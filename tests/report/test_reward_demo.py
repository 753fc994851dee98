"""The reward demo's verdict: the call follows the per-seed paired differences; the ladder's tables."""

from __future__ import annotations

import pytest

from robustvlm.analysis.reward_matrix import MatrixResults
from robustvlm.experiments.reward.report import full_runs_table, ladder_tables
from robustvlm.experiments.reward.verdict import reward_verdict as verdict
from robustvlm.reward.ladder_results import (
    LinearLoss,
    LinearProxy,
    LinearRung,
    MatrixRung,
    ProxyWeights,
    RunWeights,
)


def diff(values: list[float]) -> dict:
    mean = sum(values) / len(values)
    return {"mean": mean, "std": 0.01, "values": values, "n": len(values), "wins": sum(v > 0 for v in values)}


@pytest.mark.parametrize(
    ("ood", "sfd", "call"),
    [
        ([0.01, 0.05, 0.03], [-0.01, -0.2, -0.1], "helped: it raised o.o.d. accuracy and lowered SFD in every seed"),
        ([-0.01, -0.05, 0.0], [0.01, 0.2, 0.0], "did not help"),
        ([0.013, 0.054, 0.031], [-0.006, -0.22, 0.128], "o.o.d. accuracy rose in 3 of 3 seed(s) and SFD fell in 2 of 3"),
    ],
)
def test_the_call_follows_every_seed(ood, sfd, call):
    lines = verdict({"ood": diff(ood), "sfd": diff(sfd), "iid": diff([0.0, 0.0, 0.0])})
    assert call in lines[-1]
    assert lines[0].startswith("Not established: no headline difference is decided")  # no paired test given
    assert lines[1].startswith("Every reward model is read at its last training step (no model selection)")
    assert f"higher in {sum(v > 0 for v in ood)} of 3" in lines[2]
    assert f"lower in {sum(v < 0 for v in sfd)} of 3" in lines[3]


def test_one_seed_says_it_is_a_smoke_test_and_prints_no_spread():
    one = {"mean": 0.02, "std": None, "values": [0.02], "n": 1, "wins": 1}
    lines = verdict({"ood": one, "sfd": {**one, "mean": -0.01, "values": [-0.01]}, "iid": one},
                    sfd_cells="`standard` 5 of 12, `shortcut_aware` 7 of 12")
    assert lines[0].startswith("Not established")
    assert lines[1].startswith("One seed only: a smoke test") and "no model selection" in lines[2]
    assert all("±" not in line for line in lines)
    assert "cells with a defined SFD: `standard` 5 of 12" in lines[4]
    many = verdict({"ood": diff([0.01, 0.02]), "sfd": diff([-0.01, -0.02]), "iid": diff([0.0, 0.0])})
    assert not any(line.startswith("One seed") for line in many)


def _matrix(ood: list[float], sfd: list[float] | None, cells: tuple[int, int] = (2, 3)) -> dict:
    spread = {"values": ood}
    return {"averages": {"iid": {"values": [0.9] * len(ood)}, "ood": spread},
            "sfd": {"values": sfd} if sfd is not None else None, "cells": {"defined": [cells[0]], "cells": [cells[1]]}}


def test_ladder_tables_pair_each_rung_by_seed():
    def rung(values: dict) -> MatrixResults:
        return MatrixResults(list(values), "text_only", ["a"], ["a", "b"], [0, 1],
                             averages={k: v["averages"] for k, v in values.items()},
                             sfd_average={k: v["sfd"] for k, v in values.items() if v["sfd"] is not None},
                             sfd_cells={k: v["cells"] for k, v in values.items() if v["sfd"] is not None})

    matrix = rung({"standard": _matrix([0.40, 0.50], [0.3, 0.2]), "text_only": _matrix([0.4, 0.4], None),
                   "shortcut_aware": _matrix([0.45, 0.49], [0.1, 0.2])})
    sfc = {"mean": 0.5, "above_half": 0.5, "proxy_wrong": 0.1, "weight_proxy_wrong": 0.2,
           "mean_proxy_wrong": 0.9, "mean_proxy_right": 0.4}
    proxy = ProxyWeights([0.9, 0.9], [sfc, sfc])
    linear = LinearRung({loss: LinearLoss([0.5, 0.5], [0.9, 0.9], [0.5, 0.6], [0.5, None])
                         for loss in ("standard", "text_only", "shortcut_aware")},
                        LinearProxy([0.9, 0.9], [0.5, 0.5], [sfc, sfc]))
    losses, weights = ladder_tables(linear, MatrixRung(matrix, proxy), MatrixRung(matrix, proxy))
    rows = {(r[0], r[1]): r for r in losses.rows}
    assert rows["2 frozen backbone", "shortcut_aware"][3:] == ["47.0 ± 2.8", "15.0 ± 7.1", "2 of 3", "+5.0, -1.0"]
    assert rows["1 linear", "standard"][4:6] == ["50.0", "1 of 2"]  # one SFD undefined
    assert rows["3 full model", "text_only"][4:] == ["—", "—", "—"]
    assert weights.rows[0][1:] == ["90.0 ± 0.0", "10.0 ± 0.0", "20.0 ± 0.0", "0.90 ± 0.00", "0.40 ± 0.00", "50.0 ± 0.0"]


def test_full_runs_table_gives_each_runs_weight_shift_and_gain():
    cells = {label: {f"a->{t}": {"values": [v, 0.0]} for t, v in zip("abc", values)}
             for label, values in (("standard", [0.9, 0.2, 0.4]), ("shortcut_aware", [0.8, 0.5, 0.5]))}
    sfc = {"proxy_wrong": 0.1, "weight_proxy_wrong": 0.25}
    matrix = MatrixResults(list(cells), "text_only", ["a"], ["a", "b", "c"], [3, 4], cells=cells)
    table = full_runs_table(MatrixRung(matrix, ProxyWeights([], [], [RunWeights(3, "a", sfc)])))
    assert table.rows == [["3", "a", "10.0", "25.0", "2.50", "+20.0"]]  # (0.5 + 0.5) / 2 - (0.2 + 0.4) / 2
