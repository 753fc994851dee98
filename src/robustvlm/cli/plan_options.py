"""Command-line options made from a typed plan: one option per field of an experiment's plan
dataclass (`experiments.option`), its help from the field's metadata and its default
from the experiment's `default` preset; and the plan back from the parsed arguments.

Field types read: `bool` (a flag), `int` (>= the field's minimum), `str` (its choices, if any),
`X | None`, and `tuple[X, ...]` (comma-separated; a positional field takes the command's trailing
words). A default that is None and says what it stands for (`OptionSpec.shown`, e.g. every
registered objective that applies) is read only when the help is printed.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from robustvlm.cli.options import INT_MAX, int_at_least
from robustvlm.experiments import Experiment, OptionSpec, flag, option_spec

SHOWN = "shown_default"
"""The attribute of an argparse action holding its lazily shown default (`PlanHelpFormatter`)."""


class PlanHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help, with the default of an option whose plan says what its None stands for
    (`OptionSpec.shown`) computed when the help is printed."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        shown: Callable[[], str] | None = getattr(action, SHOWN, None)
        text = action.help or ""
        return f"{text} (default: {shown().replace('%', '%%')})" if shown else text


def _element(kind: Any) -> tuple[Any, bool]:
    """(the field's type without None, whether it is a comma-separated tuple of that type's items)."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
    if typing.get_origin(kind) is tuple:
        return typing.get_args(kind)[0], True
    return kind, False


def _item_parser(kind: Any, spec: OptionSpec) -> Callable[[str], Any]:
    """An argparse type for one value of type `kind`."""
    if spec.parse is not None:
        return spec.parse
    if kind is int:
        return int_at_least(spec.minimum if spec.minimum is not None else -INT_MAX - 1)
    return str


def comma_separated(item: Callable[[str], Any]) -> Callable[[str], tuple[Any, ...]]:
    """An argparse type: comma-separated values of `item` (blank parts dropped; none at all is an
    error, at parse time, not an empty run found out later)."""
    def parse(text: str) -> tuple[Any, ...]:
        values = tuple(item(part.strip()) for part in text.split(",") if part.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"{text!r} names nothing: give one value or more, comma-separated")
        return values
    return parse


def _metavar(kind: Any, spec: OptionSpec) -> str | None:
    """An option's metavar when its plan does not name one: N for an integer, else argparse's."""
    return "N" if kind is int and spec.choices is None else None


def _shown(value: Any) -> str:
    """A default as the help shows it."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def add_plan_options(parser: argparse.ArgumentParser, experiment: Experiment[Any, Any], prefix: str = "",
                     *, hidden: bool = False) -> None:
    """One option of `parser` per field of `experiment.plan`, stored as `prefix + field name`;
    `hidden`: options the parser only catches (no help, default None, no positional), and none
    the parser already has."""
    hints = typing.get_type_hints(experiment.plan)
    default = experiment.default_plan()
    for plan_field in fields(experiment.plan):
        spec, value = option_spec(plan_field), None if hidden else getattr(default, plan_field.name)
        kind, many = _element(hints[plan_field.name])
        dest, name = prefix + plan_field.name, flag(plan_field.name)
        if hidden and (spec.positional or name in parser._option_string_actions):
            continue
        if spec.positional:
            parser.add_argument(dest, nargs="*", help=spec.help)
            continue
        if kind is bool:
            parser.add_argument(name, dest=dest, action="store_true", help=argparse.SUPPRESS if hidden else spec.help)
            continue
        item = _item_parser(kind, spec)
        shown = "" if value is None or spec.shown else f" (default: {_shown(value)})"
        action = parser.add_argument(name, dest=dest, default=value, metavar=spec.metavar or _metavar(kind, spec),
                                     type=comma_separated(item) if many else item, choices=spec.choices,
                                     help=argparse.SUPPRESS if hidden else spec.help + shown)
        if value is None and spec.shown is not None:
            setattr(action, SHOWN, spec.shown)


def plan_from(args: argparse.Namespace, experiment: Experiment[Any, Any], prefix: str = "") -> Any:
    """The plan the parsed `args` give (`add_plan_options` with the same `prefix`)."""
    values = {f.name: getattr(args, prefix + f.name) for f in fields(experiment.plan)}
    return experiment.plan(**{name: tuple(v) if isinstance(v, list) else v for name, v in values.items()})


def reads(experiment: Experiment[Any, Any], option: str) -> bool:
    """Whether `experiment`'s plan has command-line option `option` ("--n-envs")."""
    return any(flag(f.name) == option for f in fields(experiment.plan) if not option_spec(f).positional)
