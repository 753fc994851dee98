"""`sfc_pairs.jsonl`: a resumed run appends the steps it repeats; the reader keeps the last row of
each (step, pair)."""

from __future__ import annotations

import json

from robustvlm.analysis.sfc_steps import SFC_PAIRS, read_sfc_pairs


def test_the_last_row_of_each_step_and_pair_wins(tmp_path):
    rows = [{"step": 1, "id": "a", "env": "long", "sfc": 0.4, "main": 0.1, "proxy": 0.2},
            {"step": 2, "id": "a", "env": "long", "sfc": 0.5, "main": 0.1, "proxy": 0.2},
            {"step": 2, "id": "b", "env": "long", "sfc": 0.6, "main": 0.1, "proxy": 0.2},
            {"step": 2, "id": "a", "env": "long", "sfc": 0.9, "main": 0.3, "proxy": 0.2}]  # resumed: step 2 again
    (tmp_path / SFC_PAIRS).write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    got = read_sfc_pairs(tmp_path)
    assert [(r["step"], r["id"], r["sfc"]) for r in got] == [(1, "a", 0.4), (2, "a", 0.9), (2, "b", 0.6)]
