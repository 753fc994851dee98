"""A typed plan's fields: options, given on the command line, and settings, fixed by its presets.

A plan is a frozen dataclass. A field declared with `option(default, help, ...)` is an option:
`cli/plan_options.py` makes it a command-line option whose help shows its default from the
experiment's presets. A field declared without it is a setting that only a preset sets (a
workflow's sizes, its rungs). Kept free of imports: the plans of the lowest layers declare their
options here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OPTION = "option"
QUICK_HELP = "a smaller run (a smoke test: its verdict says what it checked, no finding)"
"""The help of every experiment's `--quick`."""
"""The key of a plan field's metadata that holds its `OptionSpec`."""


@dataclass(frozen=True)
class OptionSpec:
    """How a plan field is given on the command line: its help; `metavar`; `parse` for text read
    another way than as itself (a config name resolved to its file); `minimum` for an
    integer; `choices` for text; `with_zoo` True (only with --zoo), False (only without) or None
    (either); `positional` for a list given as the command's trailing words; `shown`: what the help
    gives as the default when the field's default is None (read when help is printed)."""

    help: str
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None
    minimum: int | None = None
    choices: tuple[str, ...] | None = None
    with_zoo: bool | None = None
    positional: bool = False
    shown: Callable[[], str] | None = None


def option(default: Any, help: str, **spec: Any) -> Any:
    """A plan field: `default` and its command-line option (`OptionSpec`'s other fields by keyword)."""
    return field(default=default, metadata={OPTION: OptionSpec(help, **spec)})


def option_spec(plan_field: dataclasses.Field[Any]) -> OptionSpec:
    """The `OptionSpec` a plan field was declared with (`option`)."""
    return plan_field.metadata[OPTION]


def option_fields(plan: Any) -> list[dataclasses.Field[Any]]:
    """The fields of plan class (or plan) `plan` declared with `option`, in their order; the
    others are settings."""
    return [f for f in dataclasses.fields(plan) if OPTION in f.metadata]
