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
