"""`robustvlm demo` without a name (`make demo`): Colored MNIST on real images, pixels and a frozen
VLM vision tower; overrides belong to `demo tasks`."""

from __future__ import annotations

import json

import pytest
from report_checks import assert_opens_with_verdict, assert_smoke_verdict_only

from robustvlm.cli import main
from robustvlm.experiments.ladder.plan import DEMO, FULL


def test_the_default_demo_is_the_ladders_pixel_and_tower_rungs_at_full_settings():
    assert [(source, rung.id) for source, rung in DEMO.cells] == [("fashion", "pixels"), ("fashion", "tower:tiny:idefics3")]
    assert DEMO.seeds == (0, 1, 2) and not DEMO.infer_on
    # the full ladder's settings, so the demo's figures are the full ladder's on these rungs
    assert DEMO == FULL.__class__(**{**vars(FULL), "rungs": DEMO.rungs, "modes": (), "infer_on": ()})


@pytest.mark.slow
def test_quick_default_demo_writes_a_report_that_opens_with_its_verdict(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["summary"]) == {"mnist/pixels", "mnist/tower:tiny:idefics3"}
    assert [d["dataset"] for d in results["data"]] == ["mnist (5,000 digits)"]  # the copy it read (issue 56.5)
    assert (out / "ladder.png").stat().st_size > 0  # README's picture (`make figures-readme` copies it)
    assert_opens_with_verdict(out)
    assert_smoke_verdict_only((out / "report.md").read_text(), "The invariance ladder")
    assert "report.md" in capsys.readouterr().out


def test_overrides_without_a_demo_name_are_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "train.steps=2"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and "invalid choice: 'train.steps=2'" in err and "'tasks'" in err
