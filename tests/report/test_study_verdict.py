"""A study report's verdict and heading say when the study checks code, not methods: a quick
demo's verdict opens with the smoke-test line (issue 46.7: `demo tasks --zoo --quick` lacked it),
a smoke run is headed SMOKE TEST; results.json carries both, and old files' `dry_run` still reads."""

from __future__ import annotations

import json

from robustvlm.analysis.study import MethodRuns, StudyResults, aggregate_study
from robustvlm.report.page import to_markdown
from robustvlm.report.study_report import build_blocks, verdict_blocks


def _results(**flags: bool) -> StudyResults:
    rows = {label: {0: [{"id": f"{env}{i}", "env": env, "ood": env == "c", "prediction": "p", "target": "t",
                         "instruction": "q", "scores": {"exact": float((i + k) % 2)}}
                        for env in "abc" for i in range(4)]}
            for k, label in enumerate(("erm", "new"))}
    scores = aggregate_study(rows, ["exact"])
    return StudyResults(scores, {label: MethodRuns(label, {}, {}) for label in rows}, [0], {}, **flags)


def test_a_quick_studys_verdict_opens_with_the_smoke_test_then_the_conclusion():
    scores = _results().scores
    text = [block.text for block in verdict_blocks(scores, quick=True)]
    assert text[0] == "Verdict"
    assert text[1].startswith("Quick run: a smoke test. It shows that the code runs, not what the methods do")
    assert text[2] == "One seed only: nothing can be concluded about any method against erm."
    assert [block.text for block in verdict_blocks(scores)][1] == text[2]


def test_the_report_of_a_quick_study_and_of_a_smoke_run(tmp_path):
    quick = to_markdown(build_blocks(_results(quick=True), tmp_path, {}, {}))
    assert quick.index("Quick run: a smoke test.") < quick.index("One seed only")
    assert "SMOKE TEST" not in quick
    smoke = to_markdown(build_blocks(_results(smoke=True), tmp_path, {}, {}))
    assert smoke.startswith("# robustvlm study — SMOKE TEST") and "Smoke test: a tiny" in smoke
    assert "DRY RUN" not in smoke and "Quick run" not in smoke


def test_results_json_says_smoke_and_quick_and_old_files_dry_run_still_reads():
    saved = _results(smoke=True, quick=True).to_dict()
    assert saved["smoke"] is True and saved["quick"] is True and "dry_run" not in saved
    back = StudyResults.from_dict(json.loads(json.dumps(saved)))
    assert back.smoke and back.quick
    old = {k: v for k, v in saved.items() if k not in ("smoke", "quick")} | {"dry_run": True}
    assert StudyResults.from_dict(old).smoke and not StudyResults.from_dict(old).quick
    assert not StudyResults.from_dict({**old, "dry_run": False}).smoke
