"""benchmarks/gpu_check.py: its CPU dry run (the same plan at tiny size) and its budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def run_check(out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(SCRIPT), "--dry", "--out", str(out), *extra],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
@pytest.mark.distributed
def test_dry_run_passes_every_stage_within_its_budget(tmp_path):
    # the wall-clock budget of the dry run (180 s) holds on an idle 2-core machine; the suite may
    # share the machine with other jobs, so the run gets room and its CPU time is what is checked
    done = run_check(tmp_path, "--budget", "600")
    report = json.loads((tmp_path / "gpu_report.json").read_text())
    stages = {s["stage"]: s for s in report["run"]["stages"]}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    families = ["idefics3", "llava", "llava_onevision", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "internvl", "gemma3",
                "paligemma"]
    for kind in families:
        result = stages[f"smoke {kind}"]["result"]
        assert "resume bit-exact" in result["train"]
        assert all(str(v).startswith(("ok", "skipped")) for v in result.values()), result
    assert stages["smoke paligemma"]["result"]["rm"].startswith("skipped: PaliGemma's processor")
    for name in ("tiny:qwen2_vl", "tiny:idefics3"):
        figures = stages[f"bench-real {name}"]["result"]
        assert {r["method"] for r in figures["train"]} == {"erm", "dynamic_birm", "irm"}
        assert figures["options"]["max_abs_diff"] < 1e-3 and figures["reward"]["max_abs_diff"] < 1e-3
        assert figures["generate"]["speedup"] > 0
    parallel = stages["data-parallel mc eval"]["result"]  # both variants launched by torchrun, as on a GPU
    assert parallel["processes"] == 2 and parallel["model"] == "tiny:qwen2_vl", parallel
    assert parallel["one_qps"] > 0 and parallel["all_qps"] > 0
    written = json.loads((tmp_path / "data_parallel.json").read_text())
    assert parallel["ratio"] == round(written["launch_scoring_qps"] / written["one_scoring_qps"], 2)
    assert written["launch_one"] is True and written["questions"] == 16
    assert stages["deepspeed zero-2"]["status"].startswith("skipped: ")
    assert report["run"]["within_budget"] and report["run"]["cpu_seconds"] < 120
    table = (tmp_path / "gpu_report.md").read_text()
    assert "| smoke gemma3 | ok |" in table and "### bench-real tiny:qwen2_vl" in table
    assert "| data-parallel mc eval | ok |" in table and "ratio: " in table


@pytest.mark.slow
def test_budget_is_enforced(tmp_path):
    done = run_check(tmp_path, "--budget", "0.05")  # far less than any stage takes, idle machine or not
    report = json.loads((tmp_path / "gpu_report.json").read_text())
    statuses = [s["status"] for s in report["run"]["stages"]]
    assert statuses[0] == "stopped: budget ran out during the stage"
    assert set(statuses[1:]) == {"skipped: budget"}
    assert done.returncode == 1


def test_a_stage_stopped_inside_a_library_that_wraps_errors_is_over_budget(monkeypatch, tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))

    def wrapping_library() -> dict:  # as jinja2's lexer: any Exception becomes its own error
        try:
            time.sleep(5)
        except Exception as exc:
            raise ValueError("wrapped") from exc
        return {"never": "reached"}

    monkeypatch.setattr(gpu_check, "plan", lambda device, out: [("wrapped", wrapping_library), ("next", dict)])
    report = gpu_check.run_plan("cpu", 0.05, tmp_path)
    assert [s["status"] for s in report["stages"]] == ["stopped: budget ran out during the stage", "skipped: budget"]


