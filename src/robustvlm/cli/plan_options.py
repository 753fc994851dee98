"""Command-line options made from a typed plan: one option per option field of an experiment's
plan dataclass (`plan_fields.option`), its help from the field's metadata and its default from the
experiment's presets (`(default: 0,1,2; --quick: 0)` where the presets differ); and the plan back
from the parsed arguments: the preset the flags select, with the options given.

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
from dataclasses import fields, replace
from typing import Any

from robustvlm.cli.options import INT_MAX, int_at_least
from robustvlm.experiments import Experiment, OptionSpec, flag, option_spec
from robustvlm.experiments.base import option_fields

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


def _methods(experiment: Experiment[Any, Any], name: str) -> Callable[[], str] | None:
    """For a `methods` option: the experiment's own method list, read when the help is printed
    (what a plan leaving it None trains, `Experiment.methods`)."""
    methods = experiment.methods
    left_open = name == "methods" and getattr(experiment.default_plan(), name) is None
    return (lambda: ",".join(methods())) if left_open and methods is not None else None


def _label(experiment: Experiment[Any, Any], name: str, base: Any) -> str:
    """How the help names preset `name` beside `base`: the flags it sets that `base` does not."""
    plan = experiment.presets[name]
    flags = [flag(f) for f in experiment.flags() if getattr(plan, f) and not getattr(base, f)]
    return " ".join(flags) or name


def shown_default(experiment: Experiment[Any, Any], name: str) -> str | None:
    """The default the help gives for option field `name`: its value in the presets the flags
    select (`Experiment.preset`) of the variant that reads it (with or without --zoo), the first one's as `default: X`, then each other value
    with the presets that hold it (`--quick: Y`); None where every such preset leaves it None."""
    spec = option_spec(next(f for f in fields(experiment.plan) if f.name == name))
    reading = [(n, p) for n, p in experiment.presets.items() if experiment.base_of(p) is p  # one the flags select
               and (spec.with_zoo is None or bool(getattr(p, "zoo", False)) == spec.with_zoo)]
    base = reading[0][1]
    groups: dict[str, list[str]] = {}
    for preset, plan in reading:
        value = getattr(plan, name)
        if value is not None:
            groups.setdefault(_shown(value), []).append("default" if value == getattr(base, name)
                                                        else _label(experiment, preset, base))
    parts = [value if "default" in labels else f"{' / '.join(dict.fromkeys(labels))}: {value}"
             for value, labels in groups.items()]
    return "; ".join(parts) if parts else None


def add_plan_options(parser: argparse.ArgumentParser, experiment: Experiment[Any, Any], prefix: str = "",
                     *, hidden: bool = False) -> None:
    """One option of `parser` per option field of `experiment.plan`, stored as `prefix + field
    name`, None (a flag: False) when not given; `hidden`: options the parser only catches (no help,
    no positional), and none the parser already has."""
    hints = typing.get_type_hints(experiment.plan)
    for plan_field in option_fields(experiment.plan):
        spec = option_spec(plan_field)
        kind, many = _element(hints[plan_field.name])
        dest, name = prefix + plan_field.name, flag(plan_field.name)
        if hidden and (spec.positional or name in parser._option_string_actions):
            continue
        if spec.positional:
            parser.add_argument(dest, nargs="*", default=None, help=spec.help)
            continue
        if kind is bool:
            parser.add_argument(name, dest=dest, action="store_true", help=argparse.SUPPRESS if hidden else spec.help)
            continue
        item = _item_parser(kind, spec)
        lazy = spec.shown or _methods(experiment, plan_field.name)
        shown = None if hidden or lazy else shown_default(experiment, plan_field.name)
        action = parser.add_argument(name, dest=dest, default=None, metavar=spec.metavar or _metavar(kind, spec),
                                     type=comma_separated(item) if many else item, choices=spec.choices,
                                     help=argparse.SUPPRESS if hidden else spec.help + (f" (default: {shown})"
                                                                                         if shown is not None else ""))
        if lazy is not None and not hidden:
            setattr(action, SHOWN, lazy)


def plan_from(args: argparse.Namespace, experiment: Experiment[Any, Any], prefix: str = "") -> Any:
    """The plan the parsed `args` give (`add_plan_options` with the same `prefix`): the preset
    their flags select (`Experiment.preset`) with each option given."""
    values = {f.name: getattr(args, prefix + f.name) for f in option_fields(experiment.plan)}
    given = {name: tuple(v) if isinstance(v, list) else v for name, v in values.items()
             if v is not None and v is not False and v != []}
    base = experiment.preset(**{name: bool(given.get(name)) for name in experiment.flags()})
    return replace(base, **given)


def reads(experiment: Experiment[Any, Any], option: str) -> bool:
    """Whether `experiment`'s plan has command-line option `option` ("--n-envs")."""
    return any(flag(f.name) == option for f in option_fields(experiment.plan) if not option_spec(f).positional)
