"""The experiments: every built-in demo (`robustvlm demo NAME`) as one package, and their registry.

Each subpackage is one experiment, everything that is its own together: `experiment.py` declares
its `Experiment` (typed plan, presets, run, figures and the source modules its results depend on),
`run.py` runs it and writes its report, and its other modules are the parts only it uses (the
ladder's VLM rungs, the reward ladder's rungs, the robustness demo's report). Shared pieces live in
`base.py` (`Experiment`, `option`, presets). A new demo is one package and one name in `PACKAGES`;
the command line, `robustvlm demo --help` and the generated references pick it up.

The experiments are the layer above `workflows/` (tests/test_layers.py): they string its
commands together, and nothing below imports them. Each package holds its results, report and
figures too (`figures.py`: how its tables of the Results pages are made from its results.json);
the figure writer (`robustvlm.figures`) sits above and gathers them.
`perturbation.py` records a rounding-perturbation re-run of a reward or ladder run.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from robustvlm.experiments.base import (
    Experiment,
    OptionSpec,
    flag,
    option,
    option_spec,
    verdict_lines,
)

PACKAGES = ("default", "tasks", "robustness", "invariance", "ladder", "reward")
"""The experiments' packages, in the order `robustvlm demo --help` lists them."""


def _experiment(package: str) -> Experiment[Any, Any]:
    """The `EXPERIMENT` that `robustvlm.experiments.PACKAGE.experiment` declares."""
    experiment: Experiment[Any, Any] = import_module(f"{__name__}.{package}.experiment").EXPERIMENT
    return experiment


EXPERIMENTS: dict[str, Experiment[Any, Any]] = {e.name: e for e in map(_experiment, PACKAGES)}
"""The experiments by name (each its package's), in the order `robustvlm demo --help` lists them."""
DEFAULT = "default"
"""What `robustvlm demo` runs without a name."""

__all__ = ["DEFAULT", "EXPERIMENTS", "PACKAGES", "Experiment", "OptionSpec", "flag", "option", "option_spec",
           "verdict_lines"]
