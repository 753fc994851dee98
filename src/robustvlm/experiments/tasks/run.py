"""`robustvlm demo tasks`: the paper's comparison in miniature, as a study on built-in data.

ERM, static BIRM and Dynamic BIRM fine-tune a tiny offline Idefics3 on the `tasks` benchmark
(OCR held out) with three seeds (one with --quick); the study writes Table 1 (chrF, BERTScore,
CEE; ID vs OOD; mean ± std and CIs), the significance tests, heatmaps, trajectories and examples.
With `zoo`, the same study fine-tunes a pretrained model-zoo VLM on `fashion-tasks` (task types
it was instruction-tuned on, two held out; configs/demo_zoo.yaml) and reports the untouched
model's scores beside the fine-tuned rows. `methods` picks the study's methods by registry name
(default: every registered objective that declares it applies to the study; one the config's
`methods:` table does not list runs with its default hyperparameters). Re-running
reuses every finished training and evaluation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import yaml

from robustvlm.analysis.study import StudyResults
from robustvlm.config import ModelConfig, apply_overrides, deep_merge
from robustvlm.errors import ConfigError
from robustvlm.models.zoo_recipes import resolve_model_ref
from robustvlm.objectives import REGISTRY, TASKS, applicable_methods
from robustvlm.report.study_report import table1
from robustvlm.report.tables import markdown_table
from robustvlm.workflows.finetune.study import run_study

#: the report's title (the experiment, as `robustvlm demo tasks --help` summarises it)
TITLE = "Table 1 in miniature: fine-tuning methods against ERM on the OCR tasks"
TITLE_ZOO = "Table 1 on a zoo VLM: fine-tuning methods against ERM on fashion-tasks"


def demo_spec(
    quick: bool = False, overrides: list[str] | None = None, *, zoo: bool = False,
    methods: Sequence[str] | None = None,
) -> dict:
    """The packaged demo study (configs/demo.yaml; configs/demo_zoo.yaml with `zoo`), its `quick`
    part merged in with `quick`, `key=value` overrides applied to its `base` run config, training
    `methods` (registry names; default: every registered objective that applies to the study,
    `applicable_methods(TASKS)`), each with the config's entry where it has one."""
    name = "demo_zoo.yaml" if zoo else "demo.yaml"
    spec = yaml.safe_load(resources.files("robustvlm.configs").joinpath(name).read_text())
    quick_part = spec.pop("quick")
    if quick:
        spec = deep_merge(spec, quick_part)
    apply_overrides(spec["base"], overrides or [])
    spec["methods"] = _chosen_methods(spec["methods"], applicable_methods(TASKS) if methods is None else methods)
    return spec


def _chosen_methods(entries: dict[str, dict], methods: Sequence[str]) -> dict[str, dict]:
    """{label: entry} of `methods` (registry names, at least one): the config's entry for a
    method it lists, else the method with its default hyperparameters."""
    unknown = [m for m in methods if m not in REGISTRY]
    if unknown or not methods:
        raise ConfigError(f"demo tasks --methods: unknown objective(s) {unknown or methods}; "
                          f"known: {', '.join(sorted(REGISTRY))}")
    by_name = {entry["method"]: entry for entry in entries.values()}
    return {m: by_name.get(m, {"method": m}) for m in methods}


def run_demo(
    out_dir: str | Path, *, quick: bool = False, overrides: list[str] | None = None, zoo: bool = False,
    methods: Sequence[str] | None = None,
) -> StudyResults:
    """Run the demo study into `out_dir` (report.md, report.html, results.json); with `zoo`, on
    the pretrained zoo member its config names (built first: `robustvlm zoo build`)."""
    t0 = time.perf_counter()
    spec = demo_spec(quick, overrides, zoo=zoo, methods=methods)
    resolve_model_ref(ModelConfig(name=spec["base"]["model"]["name"]).ref)  # a zoo member not built yet: say so now
    results = run_study(spec, out_dir, quick=quick, heading=TITLE_ZOO if zoo else TITLE)
    table = table1(results.scores, results.zero_shot)
    print("\n" + markdown_table(table.header, table.rows))
    for metric, why in results.absent.items():
        print(f"{metric}: absent ({why})")
    print(f"\n{time.perf_counter() - t0:.0f} s; report: {(Path(out_dir) / 'report.md').absolute()} and "
          f"{(Path(out_dir) / 'report.html').absolute()}")
    return results
