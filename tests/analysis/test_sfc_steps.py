"""SFC weights per step on cue-failing and cue-agreeing pairs (`analysis.sfc_steps`), checked
against a direct recomputation with plain Python."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robustvlm.analysis.sfc_steps import cue_side, pool_steps, sfc_steps
from robustvlm.errors import DataError


def test_cue_sides_follow_each_environment():
    assert cue_side("long", "on_chosen") == "agreeing" and cue_side("long", "on_rejected") == "failing"
    assert cue_side("short", "on_rejected") == "agreeing" and cue_side("short", "on_chosen") == "failing"
    assert cue_side("clause", "on_rejected") == "agreeing" and cue_side("clause", "none") is None
    assert cue_side("plain", "on_both") is None and cue_side("plain", "none") is None


def _rows(n_steps: int = 6, per_step: int = 5, seed: int = 0) -> tuple[list[dict], dict[str, str | None]]:
    rng = np.random.default_rng(seed)
    rows, sides = [], {}
    for step in range(1, n_steps + 1):
        for k in range(per_step):
            pid = f"{step}-{k}"
            sides[pid] = ("failing", "agreeing", None)[int(rng.integers(3))]
            rows.append({"step": step, "id": pid, "sfc": float(rng.random()), "main": float(rng.normal()),
                         "proxy": float(rng.normal())})
    return rows, sides


def test_each_step_is_the_mean_over_its_pairs_of_each_side():
    rows, sides = _rows()
    steps = sfc_steps(rows, sides)
    for entry in steps:
        for side in ("failing", "agreeing"):
            mine = [r for r in rows if r["step"] == entry["step"] and sides[r["id"]] == side]
            got = entry[side]
            assert got["n"] == len(mine)
            if mine:
                assert got["sfc"] == pytest.approx(sum(r["sfc"] for r in mine) / len(mine))
                assert got["main_right"] == pytest.approx(sum(r["main"] > 0 for r in mine) / len(mine))
                assert got["main_prob"] == pytest.approx(sum(1 / (1 + math.exp(-r["main"])) for r in mine) / len(mine))
                assert got["proxy_right"] == pytest.approx(sum(r["proxy"] > 0 for r in mine) / len(mine))
            else:
                assert got["sfc"] is None


def test_pooling_steps_equals_binning_the_pairs():
    rows, sides = _rows(n_steps=7)
    pooled = pool_steps(sfc_steps(rows, sides), window=3)
    direct = sfc_steps(rows, sides, window=3)
    assert [p["step"] for p in pooled] == [d["step"] for d in direct] == [3, 6, 9]
    for p, d in zip(pooled, direct):
        for side in ("failing", "agreeing"):
            assert p[side]["n"] == d[side]["n"]
            for key in ("sfc", "main_right", "main_prob", "proxy_right"):
                assert p[side][key] == pytest.approx(d[side][key])


def test_a_pair_missing_from_the_data_is_an_error():
    with pytest.raises(DataError, match="pair 'x' is not in the data"):
        sfc_steps([{"step": 1, "id": "x", "sfc": 0.5, "main": 0.0, "proxy": 0.0}], {})
    with pytest.raises(DataError, match="window"):
        pool_steps([], window=0)
