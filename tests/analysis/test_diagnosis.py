"""Failure diagnosis verdicts: the verdict table by hand, its thresholds and errors, and the
linear probe on separable and random labels."""

from __future__ import annotations

import numpy as np
import pytest

from robustvlm.analysis.diagnosis import VERDICTS, diagnose_table, linear_probe_accuracy, skill
from robustvlm.errors import DataError


def _row(domain, probe, semantic, zero, icl=None, c=4):
    return {"domain": domain, "n_classes": c, "probe_acc": probe, "semantic_acc": semantic,
            "zero_shot_acc": zero, "icl_acc": icl}


def test_diagnose_table_covers_each_verdict():
    rows = [
        _row("blurred", 0.30, 0.95, 0.25, 0.30),    # probe near chance (0.25)
        _row("jargon", 0.95, 0.30, 0.30, 0.35),     # features fine, names not understood
        _row("medical", 0.95, 0.95, 0.30, 0.40),    # both fine, the model cannot map
        _row("natural", 0.95, 0.95, 0.90, 0.95),    # works
        _row("icl-fixes", 0.95, 0.95, 0.30, 0.90),  # zero-shot fails, demos fix the mapping
        _row("no-icl", 0.95, 0.95, 0.90),           # icl not measured
    ]
    out = diagnose_table(rows)
    assert [r["verdict"] for r in out] == ["visual", "semantic", "mapping", "none", "none", "none"]
    assert out[0]["gaps"] == ["visual", "mapping"] and out[2]["gaps"] == ["mapping"]
    assert out[2]["icl_gain"] == pytest.approx(0.10) and out[5]["icl_gain"] is None
    assert out[0]["probe_skill"] == pytest.approx((0.30 - 0.25) / 0.75)
    assert out[4]["mapping_skill"] == pytest.approx((0.90 - 0.25) / 0.75)  # the better of the two
    assert all(r["verdict"] in VERDICTS for r in out)
    assert rows[0].get("verdict") is None  # input rows untouched
    # thresholds are keyword arguments that move the verdict
    assert diagnose_table([rows[2]], mapping_min_skill=0.1)[0]["verdict"] == "none"
    assert diagnose_table([rows[3]], visual_min_skill=0.99)[0]["verdict"] == "visual"
    assert diagnose_table([rows[1]], semantic_min_skill=0.0)[0]["verdict"] == "mapping"


def test_diagnose_table_rejects_incomplete_rows():
    with pytest.raises(DataError, match="lacks probe_acc"):
        diagnose_table([{"domain": "a", "n_classes": 3, "semantic_acc": 1, "zero_shot_acc": 1}])
    with pytest.raises(DataError, match="2 classes"):
        skill(0.5, 1)
    assert skill(0.1, 10) == pytest.approx(0.0) and skill(1.0, 10) == pytest.approx(1.0)


def test_linear_probe_separable_vs_random_labels():
    rng = np.random.default_rng(0)
    labels = np.repeat(["a", "b", "c", "d"], 60)
    centres = rng.normal(size=(4, 16)) * 6
    separable = centres[np.searchsorted(["a", "b", "c", "d"], labels)] + rng.normal(size=(240, 16))
    assert linear_probe_accuracy(separable, labels) >= 0.97
    noise = rng.normal(size=(240, 16))
    random_acc = np.mean([linear_probe_accuracy(noise, rng.permutation(labels), seed=s) for s in range(3)])
    assert abs(random_acc - 0.25) < 0.1
    with pytest.raises(DataError, match=">= 2 examples"):
        linear_probe_accuracy(noise[:5], ["a", "a", "b", "c", "c"])
    with pytest.raises(DataError, match=r"\[N, D\]"):
        linear_probe_accuracy(noise[:4, 0], ["a", "b", "a", "b"])
