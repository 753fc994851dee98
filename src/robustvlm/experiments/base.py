"""An experiment as one object: a demo's name, its typed plan, presets, run and sources (its
figures of the Results pages are its package's `figures.py`, `figures.registry`).

A plan is a frozen dataclass whose fields are the experiment's options, each declared with
`option(default, help, ...)` (`plan_fields`), and its settings, fixed by its presets (`quick`,
`zoo`, ...: the plan each flag, or pair of flags, selects); the command line (`cli/demo.py`) makes
`robustvlm demo NAME` and its options from the option fields, so an option exists only for the
experiments whose plans have it, and starts from the preset its flags select.
`Experiment.execute` checks a plan, fills its method list from the objective registry where the
plan leaves it open, runs it into a folder and prints the first lines of its report's verdict.
Kept free of heavy imports: the command line reads every experiment to build its parser, and each
experiment's `run` imports its workflow only when called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from robustvlm.data.provenance import add_to_results
from robustvlm.errors import ConfigError
from robustvlm.plan_fields import OPTION, OptionSpec, option, option_fields, option_spec

P = TypeVar("P")
R = TypeVar("R")

VERDICT_LINES = 8
"""Lines of the report's verdict printed when a demo ends."""


def presets(plan: Callable[..., P], *flags: str) -> dict[str, P]:
    """{"default": plan()} and, for each of `flags` ("quick", "zoo"), the plan with that flag set."""
    return {"default": plan(), **{name: plan(**{name: True}) for name in flags}}


def default_demo_folder(name: str) -> Callable[[Any], str]:
    """A plan's default output folder: demo_NAME, then _zoo and _quick where the plan sets them."""
    return lambda plan: (f"demo_{name}" + ("_zoo" if getattr(plan, "zoo", False) else "")
                         + ("_quick" if plan.quick else ""))


def flag(name: str) -> str:
    """The command-line option of plan field `name` ("n_envs" -> "--n-envs")."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Experiment(Generic[P, R]):
    """A demo.

    Attributes:
        name: `robustvlm demo NAME`.
        summary: one line for `robustvlm demo --help`.
        plan: the plan's dataclass (its fields: the options and the settings).
        presets: named plans (`default` always; `quick`, `paper`, `zoo`, `zoo-quick` where the demo
            has them): what each option not given is, and every setting.
        run: runs a plan into an output folder and returns the typed results it wrote to results.json.
        out: the output folder of a plan when --out is not given.
        depends_on: the source modules (or packages) its results depend on.
        methods: the default method list of a plan whose `methods` is None (read when it runs).
        example: the command lines of its help's example, in the order to run them from a fresh
            clone (a zoo demo's first builds the quick zoo; each run or classified by
            tests/test_documented_commands.py).
        reads_fashion_mnist: whether some preset reads Fashion-MNIST (its command then takes
            `--data-root`).
    """

    name: str
    summary: str
    plan: type[P]
    presets: Mapping[str, P]
    run: Callable[[P, Path], R]
    out: Callable[[P], str]
    depends_on: tuple[str, ...] = ()
    methods: Callable[[], tuple[str, ...]] | None = None
    example: tuple[str, ...] = ()
    reads_fashion_mnist: bool = True

    def default_plan(self) -> P:
        """The `default` preset: the command line's defaults."""
        return self.presets["default"]

    def flags(self) -> tuple[str, ...]:
        """The plan's flags that select a preset: its yes/no options some preset sets."""
        return tuple(f.name for f in option_fields(self.plan)
                     if any(getattr(p, f.name) is True for p in self.presets.values()))

    def preset(self, **flags: bool) -> P:
        """The first preset whose `flags()` are those given (a flag not given: off); without one
        (e.g. --zoo --quick where no preset joins them), the default preset with those flags set."""
        wanted = {name: bool(flags.get(name, False)) for name in self.flags()}
        for plan in self.presets.values():
            if all(getattr(plan, name) is value for name, value in wanted.items()):
                return plan
        return dataclasses.replace(self.default_plan(), **wanted)  # type: ignore[type-var]

    def base_of(self, plan: P) -> P:
        """The preset `plan`'s own flags select (`preset`)."""
        return self.preset(**{name: getattr(plan, name) for name in self.flags()})

    def check(self, plan: P) -> None:
        """ConfigError naming an option given away from its preset's value to the variant (with
        or without --zoo) of this experiment that does not read it."""
        zoo = bool(getattr(plan, "zoo", False))
        base = self.base_of(plan)
        for plan_field in option_fields(plan):
            wanted = option_spec(plan_field).with_zoo
            changed = getattr(plan, plan_field.name) != getattr(base, plan_field.name)
            if changed and wanted is not None and wanted != zoo:
                shown = f"robustvlm demo {self.name}{' --zoo' if zoo else ''}"
                readers = f"`demo {self.name}{' --zoo' if wanted else ''}`"
                raise ConfigError(f"{flag(plan_field.name)} does not apply to `{shown}`: it applies to {readers} only")

    def resolved(self, plan: P) -> P:
        """`plan` with its method list filled in (`methods`) where it leaves it open."""
        if self.methods is None or getattr(plan, "methods", ()) is not None:
            return plan
        return dataclasses.replace(plan, methods=self.methods())  # type: ignore[type-var]

    def execute(self, plan: P, out: str | Path | None = None) -> R:
        """Check, resolve and run `plan` into `out` (default `self.out(plan)`), add the data it read
        to its results.json; print the first lines of the verdict of the report it wrote."""
        from robustvlm.runs import mark_output_folder, unmark_unused_folder

        self.check(plan)
        folder = Path(out if out is not None else self.out(plan))
        mark_output_folder(folder, f"demo {self.name}")  # before any file: a killed demo's folder stays its own
        try:
            results = self.run(self.resolved(plan), folder)
        except BaseException:
            unmark_unused_folder(folder)  # refused before any work (e.g. a zoo member not built): no folder left
            raise
        add_to_results(folder)  # which copy of the data it read (data.provenance)
        for line in verdict_lines(folder / "report.md"):
            print(line)
        return results


def verdict_lines(report: Path, n: int = VERDICT_LINES) -> list[str]:
    """The first `n` non-blank lines under a report's first "Verdict" heading (none when the
    report or the heading is absent), behind a line naming the report."""
    if not report.is_file():
        return []
    lines = report.read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("#") and "verdict" in line.lower()), None)
    if start is None:
        return []
    body: list[str] = []
    for line in lines[start + 1:]:
        if line.startswith("#") or len(body) == n:
            break
        if line.strip():
            body.append(line)
    return [f"verdict ({report}):", *body]


__all__ = ["OPTION", "Experiment", "OptionSpec", "default_demo_folder", "flag", "option", "option_fields",
           "option_spec", "presets", "verdict_lines"]
