"""tools/icl_gain.py on a hand-made icl_predictions.jsonl: gains, answer changes and the
same-vs-cross cost against counts done by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _row(shots: int, policy: str, qid: str, domain: str, answer: str, correct: bool) -> dict:
    return {"shots": shots, "policy": policy, "id": qid, "domain": domain, "target": "coat",
            "answer": answer, "correct": correct, "demos": []}


def test_gain_and_cost_match_hand_counts(tmp_path: Path) -> None:
    rows = []
    for i in range(10):  # zero-shot: 5 of 10 clean right
        rows.append(_row(0, "zero-shot", f"c{i}", "clean", "coat" if i < 5 else "bag", i < 5))
        rows.append(_row(0, "zero-shot", f"r{i}", "rotated", "bag", False))
        # same-domain 1-shot: 8 of 10 right (3 answers changed); cross-domain: 4 of 10 (1 changed)
        rows.append(_row(1, "same-domain", f"c{i}", "clean", "coat" if i < 8 else "bag", i < 8))
        rows.append(_row(1, "cross-domain", f"c{i}", "clean", "coat" if i < 4 else "bag", i < 4))
        for policy in ("same-domain", "cross-domain"):
            rows.append(_row(1, policy, f"r{i}", "rotated", "coat", True))
    (tmp_path / "icl_predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "icl_gain.py"), str(tmp_path)],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    lines = {line.split(" |")[0]: line for line in out.splitlines() if line.startswith("| 1")}
    assert lines["| 1, same-domain"].startswith("| 1, same-domain | 10 | 0.800 | 0.500 | +0.300 [")
    assert lines["| 1, same-domain"].endswith("| 0.300 |")
    assert lines["| 1, cross-domain"].startswith("| 1, cross-domain | 10 | 0.400 | 0.500 | -0.100 [")
    assert lines["| 1, cross-domain"].endswith("| 0.100 |")
    # the cost row: same-domain 0.8 vs cross-domain 0.4 on the same clean queries; 4 answers differ
    assert lines["| 1"].startswith("| 1 | 10 | 0.800 | 0.400 | +0.400 [") and lines["| 1"].endswith("| 0.400 |")
