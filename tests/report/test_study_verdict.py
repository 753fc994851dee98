"""A study report's verdict and heading say when the study checks code, not methods: a quick
demo's or smoke run's verdict says only that it is a smoke test and what it checked (issue 46.7:
`demo tasks --zoo --quick` lacked it; issue 56.3: a finding followed it), and its title names the
study; results.json carries both flags, and old files' `dry_run` still reads."""

from __future__ import annotations

import json

from report_checks import FINDING, assert_smoke_verdict_only

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


def test_a_quick_studys_verdict_says_only_that_it_is_a_smoke_test():
    scores = _results().scores
    text = [block.text for block in verdict_blocks(scores, quick=True)]
    assert text[0] == "Verdict" and text[2] == "What ran" and len(text) == 3
    assert text[1].startswith("Quick run: a smoke test. It checked that each of erm, new trained")
    assert not FINDING.findall(text[1]) and "without --quick" in text[1]
    full = [block.text for block in verdict_blocks(scores)]
    assert full[1] == "One seed only: nothing can be concluded about any method against erm."
    assert "without --smoke" in verdict_blocks(scores, smoke=True)[1].text


def test_the_report_of_a_quick_study_and_of_a_smoke_run(tmp_path):
    quick = to_markdown(build_blocks(_results(quick=True), tmp_path, {}, {}, heading="Table 1 in miniature"))
    assert_smoke_verdict_only(quick, "Table 1 in miniature")
    smoke = to_markdown(build_blocks(_results(smoke=True), tmp_path, {}, {}, heading="Study dynamic_birm_smolvlm"))
    assert_smoke_verdict_only(smoke, "Study dynamic_birm_smolvlm")
    assert "Smoke test: a tiny" in smoke and "DRY RUN" not in smoke
    full = to_markdown(build_blocks(_results(), tmp_path, {}, {}))
    assert full.startswith("# robustvlm study\n") and "One seed only" in full


def test_results_json_says_smoke_and_quick_and_old_files_dry_run_still_reads():
    saved = _results(smoke=True, quick=True).to_dict()
    assert saved["smoke"] is True and saved["quick"] is True and "dry_run" not in saved
    back = StudyResults.from_dict(json.loads(json.dumps(saved)))
    assert back.smoke and back.quick
    old = {k: v for k, v in saved.items() if k not in ("smoke", "quick")} | {"dry_run": True}
    assert StudyResults.from_dict(old).smoke and not StudyResults.from_dict(old).quick
    assert not StudyResults.from_dict({**old, "dry_run": False}).smoke
