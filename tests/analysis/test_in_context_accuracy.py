"""In-context summaries: the gain over zero-shot and the cost against random demos, by hand."""

from __future__ import annotations

import pytest

from robustvlm.analysis.in_context_accuracy import IclCell, icl_summary


def test_gain_and_cost_arithmetic():
    rows = [
        IclCell(0, "zero-shot", "a", 10, 2, 0.2),
        IclCell(2, "random", "a", 10, 5, 0.5),
        IclCell(2, "spurious", "a", 10, 3, 0.3),
        IclCell(2, "spurious", "b", 10, 4, 0.4),
    ]
    out = icl_summary(rows)
    assert out[0].gain is None and out[0].cost is None
    assert out[1].gain == pytest.approx(0.3) and out[1].cost == pytest.approx(0.0)
    assert out[2].gain == pytest.approx(0.1) and out[2].cost == pytest.approx(0.2)
    assert out[3].gain is None and out[3].cost is None  # no 0-shot / random row for b
