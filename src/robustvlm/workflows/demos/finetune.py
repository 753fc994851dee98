"""`robustvlm demo`: the paper's comparison in miniature, as a study on built-in data.

ERM, static BIRM and Dynamic BIRM fine-tune a tiny offline Idefics3 on the `tasks` benchmark
(OCR held out) with three seeds (one with --quick); the study writes Table 1 (chrF, BERTScore,
CEE; ID vs OOD; mean ± std and CIs), the significance tests, heatmaps, trajectories and examples.
Re-running reuses every finished training and evaluation.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

import yaml

from robustvlm.analysis.study import StudyResults
from robustvlm.config import apply_overrides, deep_merge
from robustvlm.report.study_report import table1
from robustvlm.report.tables import markdown_table
from robustvlm.workflows.finetune.study import run_study


def demo_spec(quick: bool = False, overrides: list[str] | None = None) -> dict:
    """The packaged demo study (configs/demo.yaml), its `quick` part merged in with `quick`, and
    `key=value` overrides applied to its `base` run config."""
    spec = yaml.safe_load(resources.files("robustvlm.configs").joinpath("demo.yaml").read_text())
    quick_part = spec.pop("quick")
    if quick:
        spec = deep_merge(spec, quick_part)
    apply_overrides(spec["base"], overrides or [])
    return spec


def run_demo(
    out_dir: str | Path, *, quick: bool = False, overrides: list[str] | None = None
) -> StudyResults:
    """Run the demo study into `out_dir` (report.md, report.html, results.json)."""
    t0 = time.perf_counter()
    results = run_study(demo_spec(quick, overrides), out_dir)
    table = table1(results.scores)
    print("\n" + markdown_table(table.header, table.rows))
    for metric, why in results.absent.items():
        print(f"{metric}: absent ({why})")
    print(f"\n{time.perf_counter() - t0:.0f} s; report: {(Path(out_dir) / 'report.md').absolute()} and "
          f"{(Path(out_dir) / 'report.html').absolute()}")
    return results
