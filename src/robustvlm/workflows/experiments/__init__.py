"""The experiment registry: every built-in demo as one `Experiment` (`robustvlm demo NAME`).

Each module here declares one experiment: its typed plan (the options), presets, run, figures and
the source modules its results depend on. A new demo is one module and one entry in `EXPERIMENTS`;
the command line, `robustvlm demo --help` and the generated reference pick it up.
"""

from __future__ import annotations

from typing import Any

from robustvlm.workflows.experiments import default, invariance, ladder, reward, robustness, tasks
from robustvlm.workflows.experiments.base import (
    Experiment,
    OptionSpec,
    flag,
    option,
    option_spec,
    verdict_lines,
)

EXPERIMENTS: dict[str, Experiment[Any, Any]] = {
    e.name: e for e in (default.EXPERIMENT, tasks.EXPERIMENT, robustness.EXPERIMENT,
                        invariance.EXPERIMENT, ladder.EXPERIMENT, reward.EXPERIMENT)
}
"""The experiments by name, in the order `robustvlm demo --help` lists them."""
DEFAULT = default.EXPERIMENT.name
"""What `robustvlm demo` runs without a name."""

__all__ = ["DEFAULT", "EXPERIMENTS", "Experiment", "OptionSpec", "flag", "option", "option_spec", "verdict_lines"]
