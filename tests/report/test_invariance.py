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
        "reference_setting": {"n_envs": list(range(2, 11)), "dim_inv": 5, "dim_spu": 5},
        "reference_source": {"paper": "Aubin et al.", "source": "their release"},
        "protocol": {"n_envs": 3, "dim_inv": 5, "dim_spu": 2},
    }
    assert {row[1] for row in error_table(summary).rows} == {"ours"}
    text = reference_paragraph(summary).text
    assert "No published row for this setting (3 environments, 5 invariant and 2 spurious" in text
    assert "2 to 10 environments" in text


def test_every_published_number_of_environments_has_its_row():
    """The shipped table holds the authors' rows for 2-10 environments (5 + 5 dimensions); other
    dimensions have none."""
    import json
    from pathlib import Path

    from robustvlm.workflows.demos.invariance import load_reference, published_row

    source = json.loads((Path(__file__).resolve().parents[3] / "shared" / "reference"
                         / "invariance_unit_tests_nenvs.json").read_text()) if (
        Path(__file__).resolve().parents[3] / "shared").is_dir() else None
    reference = load_reference()
    for n in range(2, 11):
        row = published_row(reference, n, 5, 5)
        assert set(row) == set(EXAMPLES) and "ERM" in row["Example1"] and "IRMv1" in row["Example3"]
        if source is not None:  # the development checkout: the shipped copy is verbatim
            assert row == source["results"][str(n)]
    assert published_row(reference, 11, 5, 5) is None and published_row(reference, 3, 5, 3) is None


def test_worst_environment_beside_the_average():
    from robustvlm.report.invariance import worst_env_table

    results = {ex: {m: {"mean": 0.3, "std": 0.0, "per_env": [0.1, 0.5, 0.3]} for m in METHODS} for ex in EXAMPLES}
    results["Example2"]["irm"]["per_env"] = [0.1, float("nan"), 0.2]
    rows = {row[0]: row[1:] for row in worst_env_table({"results": results}).rows}
    assert rows["ERM"][0] == "0.50 / 0.30" and rows["ERM"][2] == "0.500 / 0.300"
    assert rows["IRMv1"][2] == "diverged"
