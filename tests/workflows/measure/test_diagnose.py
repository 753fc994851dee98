"""`robustvlm diagnose` end to end on the shapes suite: one row per domain, JSON and Markdown."""

from __future__ import annotations

import json

import pytest

from robustvlm.analysis.diagnosis import VERDICTS
from robustvlm.data.wordnet import wordnet_available
from robustvlm.evaluation.icl_settings import InContextSettings
from robustvlm.model_ref import ModelRef
from robustvlm.workflows.measure.diagnose import run_diagnosis


@pytest.mark.skipif(not wordnet_available(), reason="WordNet (wordnet-base) not installed")
def test_run_diagnosis_smoke(tmp_path, domains_suite):
    result = run_diagnosis(ModelRef.parse("tiny:idefics3"), domains_suite / "shapes", tmp_path,
                           InContextSettings(shots=(0, 1), policies=("same-domain",), n_per_env=1))
    rows = result.rows
    assert [r["domain"] for r in rows] == ["cartoon", "noisy", "photo", "sketch"]
    for r in rows:
        assert r["n_classes"] == 8 and r["n_images"] == 24 and r["verdict"] in VERDICTS
        assert 0 <= r["probe_acc"] <= 1 and 0 <= r["semantic_acc"] <= 1
    saved = json.loads((tmp_path / "diagnosis.json").read_text())
    assert saved["rows"] == json.loads(json.dumps(rows)) and saved["machine"]["torch"]["threads"] >= 1
    assert "| photo | 8 |" in (tmp_path / "diagnosis.md").read_text()
