"""Which source modules each measured figure's results depend on, and the hash of their code.

A figure block of the Results pages (`figures.write`) records the commit that measured it and
`sources_hash(name)`: the SHA-256 of the code of the modules `figure_sources(name)` declares (a
package stands for every module under it). When that code changes, the recorded hash no longer
matches and the staleness test (tests/report/test_figure_stamps.py) fails until the figure is
re-measured (`make figures EXPERIMENT`) or the block records that it was checked unaffected and
how. The declaration is by experiment (`EXPERIMENT_SOURCES`: the Makefile's `figures-EXPERIMENT`
targets), so that it can be attached to the experiment objects later; figure names map to their
experiment in `FIGURE_EXPERIMENT`, and a few tagged names (`TAGGED_EXPERIMENT`) to another one.

The modules are those whose code computes the numbers (data generation, models, objectives,
training, the experiment's workflow, analysis and the table's rendering), not the command line,
error messages or configuration plumbing; a package is named where most of it is on the path.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path

from robustvlm.errors import ConfigError
from robustvlm.report.figure_name import FigureName

_MODELS = ("robustvlm.models", "robustvlm.objectives", "robustvlm.training")
_VLM_DATA = ("robustvlm.data.collate", "robustvlm.data.prompt_inputs", "robustvlm.data.images",
             "robustvlm.data.records", "robustvlm.data.loaders", "robustvlm.data.environments")
_REWARD = (*_MODELS, *_VLM_DATA, "robustvlm.reward", "robustvlm.data.preferences",
           "robustvlm.data.preference_collate", "robustvlm.data.preference_layouts",
           "robustvlm.workflows.reward", "robustvlm.workflows.finetune.train", "robustvlm.evaluation.metrics",
           "robustvlm.analysis.reward", "robustvlm.analysis.reward_matrix", "robustvlm.analysis.stats",
           "robustvlm.experiments.reward.report", "robustvlm.report.reward_report", "robustvlm.experiments.reward.results",
           "robustvlm.experiments.reward.linear_rung", "robustvlm.experiments.reward.frozen_rung")
_LADDER = (*_MODELS, *_VLM_DATA, "robustvlm.linear", "robustvlm.data.colored_mnist", "robustvlm.data.real_images",
           "robustvlm.experiments.ladder.run", "robustvlm.experiments.ladder.vlm",
           "robustvlm.experiments.ladder.zero_shot", "robustvlm.experiments.ladder.readings", "robustvlm.experiments.ladder.plan",
           "robustvlm.experiments.ladder.rung", "robustvlm.experiments.ladder.results", "robustvlm.analysis.selection",
           "robustvlm.analysis.env_inference",
           "robustvlm.analysis.stats", "robustvlm.experiments.ladder.report")
_ZOO = ("robustvlm.workflows.zoo", "robustvlm.embeddings", "robustvlm.data.synth", "robustvlm.data.real_images")
_ICL = (*_MODELS, *_VLM_DATA, *_ZOO, "robustvlm.evaluation", "robustvlm.multiple_choice",
        "robustvlm.workflows.measure.icl_eval", "robustvlm.workflows.measure.defined_labels",
        "robustvlm.analysis.in_context_accuracy", "robustvlm.report.icl_gain")
#: Zoo II's curriculum member, measured in context by `make figures zoo-ii`
CURRICULUM = "llava-clip-m-curriculum"
#: Zoo III's language-model-first member, measured in context by `make figures zoo-iii`
LMFIRST = "llava-clip-m-lmfirst"
_ZOO_II = (*_ICL, "robustvlm.analysis.paired", "robustvlm.analysis.diagnosis", "robustvlm.workflows.measure.diagnose",
           "robustvlm.report.icl_policy", "robustvlm.report.in_context_tables", "robustvlm.report.zoo_card",
           "robustvlm.report.icl_served", "robustvlm.workflows.measure.transformers_serve")

#: experiment (the Makefile's `figures-EXPERIMENT` target) -> the modules its results depend on
EXPERIMENT_SOURCES: dict[str, tuple[str, ...]] = {
    "ladder": _LADDER,
    "ladder-zoo": (*_LADDER, *_ZOO),
    "reward": (*_REWARD, "robustvlm.data.synth.preferences", "robustvlm.experiments.reward.run"),
    "reward-zoo": (*_REWARD, *_ZOO, "robustvlm.experiments.reward.run", "robustvlm.experiments.reward.zoo",
                   "robustvlm.analysis.sfc_steps", "robustvlm.experiments.reward.zoo_report"),
    "invariance": ("robustvlm.linear", "robustvlm.objectives", "robustvlm.data.synth.linear_unit_tests",
                   "robustvlm.experiments.invariance.run", "robustvlm.experiments.invariance.results",
                   "robustvlm.analysis.env_inference",
                   "robustvlm.analysis.stats", "robustvlm.experiments.invariance.report"),
    "zoo-robustness": (*_MODELS, *_VLM_DATA, *_ZOO, "robustvlm.multiple_choice", "robustvlm.workflows.mc_eval",
                       "robustvlm.experiments.robustness.zoo", "robustvlm.experiments.robustness.zoo_corruptions",
                       "robustvlm.data.corruptions", "robustvlm.data.corrupted_suite",
                       "robustvlm.workflows.measure.robustness_fit",
                       "robustvlm.workflows.measure.task_signal", "robustvlm.workflows.measure.task_signal_data",
                       "robustvlm.analysis.accuracy_on_the_line", "robustvlm.analysis.effective_robustness",
                       "robustvlm.analysis.task_signal", "robustvlm.analysis.accuracy",
                       "robustvlm.experiments.robustness.zoo_report"),
    "zoo-tasks": (*_MODELS, *_VLM_DATA, *_ZOO, "robustvlm.evaluation", "robustvlm.experiments.tasks.run",
                  "robustvlm.workflows.finetune", "robustvlm.analysis.study", "robustvlm.analysis.stats",
                  "robustvlm.report.study_report"),
    "openclip": ("robustvlm.data.results", "robustvlm.workflows.measure.group_fit",
                 "robustvlm.workflows.measure.robustness_fit", "robustvlm.analysis.accuracy_on_the_line",
                 "robustvlm.analysis.effective_robustness", "robustvlm.analysis.group_lines",
                 "robustvlm.report.group_tables"),
    "icl": _ICL,
    "zoo-ii": _ZOO_II,
    "zoo-iii": _ZOO_II,
}

#: figure kind (`FigureName.kind`: a name's tag ignored) -> its experiment
FIGURE_EXPERIMENT: dict[str, str] = {
    **dict.fromkeys(("ladder", "ladder-vlm"), "ladder"),
    **dict.fromkeys(("ladder-zoo", "ladder-zoo-oracle", "ladder-zoo-td", "ladder-zoo-shot", "ladder-zoo-seeds",
                     "ladder-zoo-paired"),
                    "ladder-zoo"),
    **dict.fromkeys(("reward-matrix", "reward-linear", "reward-ladder", "reward-ladder-sfc", "reward-ladder-runs",
                     "rm-seeds", "rm-runs"), "reward"),
    **dict.fromkeys(("reward-zoo-matrix", "reward-zoo-ladder", "reward-zoo-ladder-sfc", "reward-zoo-runs",
                     "reward-zoo-steps", "rm-steps"), "reward-zoo"),
    **dict.fromkeys(("invariance", "invariance-spread", "invariance-eiil"), "invariance"),
    **dict.fromkeys(("zoo-robustness-members", "zoo-robustness-fits", "zoo-robustness-er", "zoo-task-signal",
                     "zoo-robustness-corruptions", "zoo-robustness-corruptions-er"), "zoo-robustness"),
    **dict.fromkeys(("zoo-tasks", "zoo-tasks-envs"), "zoo-tasks"),
    **dict.fromkeys(("openclip-lines", "openclip-er"), "openclip"),
    **dict.fromkeys(("icl-domains", "icl-gain", "icl-shift-cost", "icl-defined-labels"), "icl"),
    **dict.fromkeys(("icl-policy-cost", "diagnose", "zoo-card", "curriculum-stages", "curriculum-curve"), "zoo-ii"),
    "icl-served": "zoo-iii",
}

#: tagged figures (NAME:TAG) measured by another experiment than their name's: the curriculum
#: member's in-context figures, which `make figures zoo-ii` measures beside its own kinds, and
#: every figure of the language-model-first member, which `make figures zoo-iii` measures
TAGGED_EXPERIMENT: dict[FigureName, str] = {
    **{FigureName(kind, tag): "zoo-ii" for kind in ("icl-domains", "icl-gain", "icl-shift-cost", "icl-defined-labels")
       for tag in (CURRICULUM, f"{CURRICULUM}-4-shots")},
    **{FigureName(kind, tag): "zoo-iii" for kind in ("icl-domains", "icl-gain", "icl-defined-labels",
                                                     "icl-policy-cost", "diagnose", "zoo-card", "curriculum-stages",
                                                     "curriculum-curve", "icl-served")
       for tag in (LMFIRST, f"{LMFIRST}-4-shots")},
}


def experiment_of(figure: str) -> str:
    """The experiment of `figure`: its own in `TAGGED_EXPERIMENT`, else its kind's (the tag
    ignored); ConfigError for an undeclared one."""
    name = FigureName.parse(figure)
    if name in TAGGED_EXPERIMENT:
        return TAGGED_EXPERIMENT[name]
    if name.kind not in FIGURE_EXPERIMENT:
        raise ConfigError(f"figure {name.kind!r} (in {figure!r}) declares no source modules "
                          "(report.figure_sources.FIGURE_EXPERIMENT)")
    return FIGURE_EXPERIMENT[name.kind]


def figure_sources(figure: str) -> tuple[str, ...]:
    """The modules the results of `figure` depend on."""
    return EXPERIMENT_SOURCES[experiment_of(figure)]


def module_files(module: str) -> list[Path]:
    """The source files of `module`: its .py file, or a package's __init__.py then every other .py
    file under it, sorted."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ConfigError(f"declared source module {module!r} not found")
    origin = Path(spec.origin)
    if spec.submodule_search_locations is None:
        return [origin]
    return [origin, *sorted(p for p in origin.parent.rglob("*.py") if p != origin)]


def hash_modules(modules: Iterable[str]) -> str:
    """SHA-256 (first 12 hex digits) of the code of `modules`: each file's path below the folder
    holding its top-level package and its bytes, in path order, each file counted once."""
    files: dict[str, Path] = {}
    for module in modules:
        root = module_files(module.split(".", 1)[0])[0].parent.parent
        files.update((path.relative_to(root).as_posix(), path) for path in module_files(module))
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + files[rel].read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def sources_hash(figure: str) -> str:
    """The hash of the code `figure`'s results depend on (`hash_modules` of `figure_sources`)."""
    return hash_modules(figure_sources(figure))
