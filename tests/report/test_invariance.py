"""The invariance report."""

from __future__ import annotations

from robustvlm.data.synth.linear_unit_tests import EXAMPLES
from robustvlm.linear.protocol import METHODS


def test_other_settings_show_no_published_figures():
    from robustvlm.report.invariance import error_table, reference_paragraph

    entry = {"mean": 0.5, "std": 0.1}
    summary = {
        "results": {ex: dict.fromkeys(METHODS, entry) for ex in EXAMPLES},
        "reference": None,
        "reference_setting": {"n_envs": 3, "dim_inv": 5, "dim_spu": 5},
        "reference_source": {"paper": "Aubin et al.", "source": "their release"},
    }
    assert {row[1] for row in error_table(summary).rows} == {"ours"}
    assert "differs, so none are shown" in reference_paragraph(summary).text
