"""`robustvlm demo reward --quick`: the whole pipeline on built-in data writes an honest report."""

from __future__ import annotations

import json

from report_checks import assert_opens_with_verdict, assert_smoke_verdict_only, without_data_read

from robustvlm.experiments.reward.results import RewardDemoSummary


def test_quick_demo_writes_the_report(quick_demo):
    out = quick_demo("reward")
    text = (out / "results.json").read_text()
    results = json.loads(text)
    summary = RewardDemoSummary.from_dict(results)  # read back through the class that wrote it
    assert json.loads(json.dumps(summary.to_dict())) == without_data_read(results)
    assert summary.full.proxy.runs is not None and summary.linear.proxy.sfc
    assert results["quick"] and set(results["matrix"]["labels"]) == {"standard", "text_only", "shortcut_aware"}
    assert set(results["bon"]) == {"standard", "shortcut_aware"}
    assert [r["n"] for r in results["bon"]["standard"]["curve"]] == [1, 2, 4]
    assert set(results["linear"]) == {"standard", "text_only", "shortcut_aware", "proxy"}
    assert set(results["frozen"]["matrix"]["labels"]) == {"standard", "text_only", "shortcut_aware"}
    assert len(results["full_proxy"]["runs"]) == 4 and len(results["full_proxy"]["sfc"]) == 1
    assert (out / "frozen" / "states.npz").is_file()
    # the pair-by-pair test reads the runs' per-pair scores (resumable eval/pairs.jsonl)
    paired = results["comparison"]["paired"]
    assert set(paired) == {"iid", "ood", "all"} and paired["ood"]["seeds"] == 1
    scored = {r["id"] for r in map(json.loads, (out / "matrix" / "runs" / "standard" / "seed-0" / "long" / "eval" /
                                                "pairs.jsonl").read_text().splitlines())}
    # each of the four training environments' models on the test pairs of the other three; a pair is one cluster
    assert paired["ood"]["n"] == 4 * len(scored) * 3 // 4 and paired["ood"]["clusters"] == len(scored)
    assert_opens_with_verdict(out)
    report = (out / "report.md").read_text()
    assert_smoke_verdict_only(report, "Shortcut-aware reward models: the demo")
    for needle in ("## Shortcut-failure degradation", "## Best-of-N", "![Best-of-N curves](bon.png)",
                   "## Rung 1: linear rewards on two features",
                   "## The reward ladder: three rungs, the same losses",
                   "Rung 3 run by run"):
        assert needle in report, needle
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4  # heatmaps, SFD, correlation, Best-of-N
    assert "report.md" in (out.parent / "stdout.txt").read_text()
