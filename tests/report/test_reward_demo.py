"""The reward demo's verdict: the call follows the per-seed paired differences."""

from __future__ import annotations

import pytest

from robustvlm.report.reward_demo import verdict


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
    assert f"higher in {sum(v > 0 for v in ood)} of 3" in lines[0]
    assert f"lower in {sum(v < 0 for v in sfd)} of 3" in lines[1]


def test_one_seed_says_it_is_a_smoke_test_and_prints_no_spread():
    one = {"mean": 0.02, "std": None, "values": [0.02], "n": 1, "wins": 1}
    lines = verdict({"ood": one, "sfd": {**one, "mean": -0.01, "values": [-0.01]}, "iid": one},
                    sfd_cells="`standard` 5 of 12, `shortcut_aware` 7 of 12")
    assert lines[0].startswith("One seed only: a smoke test")
    assert all("±" not in line for line in lines)
    assert "cells with a defined SFD: `standard` 5 of 12" in lines[2]
    many = verdict({"ood": diff([0.01, 0.02]), "sfd": diff([-0.01, -0.02]), "iid": diff([0.0, 0.0])})
    assert not many[0].startswith("One seed")
