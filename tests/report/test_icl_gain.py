"""The in-context figures (`report.icl_gain` through `figures.write`) on hand-made run outputs:
gains, answer changes, the same-vs-cross cost and the defined-label table against hand counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats

from robustvlm.errors import ConfigError
from robustvlm.figures.write import render
from robustvlm.report.icl_gain import defined_labels_summary, wilson


def _row(shots: int, policy: str, qid: str, domain: str, answer: str, correct: bool) -> dict:
    return {"shots": shots, "policy": policy, "id": qid, "domain": domain, "target": "coat",
            "answer": answer, "correct": correct, "demos": []}


def _icl_run(folder: Path) -> Path:
    rows = []
    for i in range(10):  # zero-shot: 5 of 10 clean right
        rows.append(_row(0, "zero-shot", f"c{i}", "clean", "coat" if i < 5 else "bag", i < 5))
        rows.append(_row(0, "zero-shot", f"r{i}", "rotated", "bag", False))
        # same-domain 1-shot: 8 of 10 right (3 answers changed); cross-domain: 4 of 10 (1 changed)
        rows.append(_row(1, "same-domain", f"c{i}", "clean", "coat" if i < 8 else "bag", i < 8))
        rows.append(_row(1, "cross-domain", f"c{i}", "clean", "coat" if i < 4 else "bag", i < 4))
        for policy in ("same-domain", "cross-domain"):
            rows.append(_row(1, policy, f"r{i}", "rotated", "coat", True))
    folder.mkdir()
    (folder / "icl_predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_gain_and_cost_match_hand_counts(tmp_path: Path) -> None:
    run = _icl_run(tmp_path / "run")
    lines = {line.split(" |")[0]: line for line in render("icl-gain:m", run).splitlines()[2:]}
    assert lines["| 1, same-domain"].startswith("| 1, same-domain | 10 | 0.800 | 0.500 | +0.300 [")
    assert lines["| 1, same-domain"].endswith("| 0.300 |")
    assert lines["| 1, cross-domain"].startswith("| 1, cross-domain | 10 | 0.400 | 0.500 | -0.100 [")
    assert lines["| 1, cross-domain"].endswith("| 0.100 |")
    # the cost row: same-domain 0.8 vs cross-domain 0.4 on the same clean queries; 4 answers differ
    cost = render("icl-shift-cost:m", run).splitlines()[2]
    assert cost.startswith("| 1 | 10 | 0.800 | 0.400 | +0.400 [") and cost.endswith("| 0.400 |")
    (run / "icl_predictions.jsonl").unlink()
    with pytest.raises(ConfigError, match="run `robustvlm icl eval`"):
        render("icl-gain", run)


def test_defined_label_table_matches_hand_counts(tmp_path: Path) -> None:
    # 20 trials: none 10 right, clean 18 right, rotated 12 right (every rotated-right trial clean-right)
    records = [{"trial": t, "demos": cell, "correct": t < right, "prediction": "", "answer": ""}
               for cell, right in (("none", 10), ("clean", 18), ("rotated", 12)) for t in range(20)]
    summary = {"config": {"query_domain": "clean"}, **defined_labels_summary(records, "clean", 2)}
    (tmp_path / "defined_labels.json").write_text(json.dumps(summary))
    rows = [line.split(" | ") for line in render("icl-defined-labels:m", tmp_path).splitlines()[2:]]
    lo, hi = wilson(18, 20)
    assert rows[1][:4] == ["| clean", "20", f"0.900 [{lo:.3f}, {hi:.3f}]", "0.500"]
    assert rows[1][4].startswith("+0.400 [") and rows[1][5] == "— |"
    assert rows[2][5].startswith("+0.300 [") and rows[0][4] == "—"
    ci = stats.binomtest(18, 20).proportion_ci(method="wilson")
    assert (lo, hi) == pytest.approx((ci.low, ci.high)) and lo == pytest.approx(0.6990, abs=1e-3)
