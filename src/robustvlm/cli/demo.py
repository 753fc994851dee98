"""`robustvlm demo [NAME]`: the built-in demos, one subcommand per registered experiment
(`experiments.EXPERIMENTS`), each with the options of its typed plan (`plan_options`);
without a name, the default demo (`make demo`). An option of another demo is refused, naming the
demos that read it.

`--kernels avx2` runs a demo on other float kernels (`machine.KERNEL_SETS`: torch's, MKL's and
oneDNN's AVX2 code on an AVX-512 CPU), a check that its verdict does not hang on float rounding.
Those kernels are chosen when torch first loads, so the demo runs in a new process with their
variables set when this one has already loaded torch; results.json's machine record says which ran.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from robustvlm.cli.options import SubParsers, add_data_root, example
from robustvlm.cli.output_checks import output_folder
from robustvlm.cli.plan_options import PlanHelpFormatter, add_plan_options, plan_from, reads
from robustvlm.errors import ConfigError
from robustvlm.experiments import DEFAULT, EXPERIMENTS, Experiment, flag
from robustvlm.machine import KERNEL_SETS, KERNEL_VARIABLES, forced_kernels, kernel_environment

BEFORE = "before_"
"""The prefix under which `robustvlm demo` itself stores options: the default demo's, and any other
demo's given before that demo's name (`demo --quick ladder`: a deprecated spelling, passed on with a
warning) or to the default demo (refused)."""


def _out_help(experiment: Experiment[Any, Any]) -> str:
    """--out's help: the folder of each preset."""
    shown = experiment.out(experiment.default_plan())
    folders = {name: experiment.out(plan) for name, plan in experiment.presets.items()
               if experiment.out(plan) != shown}
    return f"output folder (default: {'; '.join([shown, *(f'{n}: {f}' for n, f in folders.items())])})"


def _explain(name: str) -> Callable[[str], str | None]:
    """The message refusing an option `robustvlm demo NAME` does not read (None: no demo reads it)."""
    def explain(option: str) -> str | None:
        readers = [f"`demo {n}`" for n, e in EXPERIMENTS.items() if reads(e, option)]
        shown = "robustvlm demo" + ("" if name == DEFAULT else f" {name}")
        return f"{option} does not apply to `{shown}`: it applies to {', '.join(readers)} only" if readers else None
    return explain


def _given_first(args: argparse.Namespace) -> dict[str, Any]:
    """{field: value} of the options given to `robustvlm demo` before any name (the others' default
    is None, a flag's False), other than the default demo's own left at their defaults."""
    own = EXPERIMENTS[DEFAULT].default_plan()
    return {key.removeprefix(BEFORE): value for key, value in vars(args).items()
            if key.startswith(BEFORE) and value is not None and value is not False
            and value != getattr(own, key.removeprefix(BEFORE), None)}


def _on_kernels(args: argparse.Namespace) -> int | None:
    """Make the demo run on the kernels `--kernels` names: None when this process may run it (they
    are in force, or torch is not loaded yet and their variables are now set); else the exit
    status of the same command line run in a new process with them."""
    name = getattr(args, "kernels", None) or getattr(args, BEFORE + "kernels", None)
    if name is None or forced_kernels() == name:
        return None
    if "torch" not in sys.modules:
        for variable in KERNEL_VARIABLES:
            os.environ.pop(variable, None)
        os.environ.update(KERNEL_SETS[name])
        return None
    print(f"running on {name} kernels: a new process with {' '.join(f'{k}={v}' for k, v in KERNEL_SETS[name].items())}"
          .rstrip(), file=sys.stderr)
    return subprocess.run([sys.executable, "-m", "robustvlm", *args.argv], env=kernel_environment(name),
                          check=False).returncode


def _run_default(args: argparse.Namespace) -> int:
    """`robustvlm demo` without a name: the default experiment with the options given to `demo`."""
    experiment = EXPERIMENTS[DEFAULT]
    for key in _given_first(args):
        if key not in ("out", "kernels") and not reads(experiment, flag(key)):
            raise ConfigError(_explain(DEFAULT)(flag(key)) or f"demo: {flag(key)} is not an option")
    plan = plan_from(args, experiment, BEFORE)
    status = _on_kernels(args)
    if status is None:
        experiment.execute(plan, args.before_out)
    return status or 0


def _run_named(args: argparse.Namespace) -> int:
    """`robustvlm demo NAME`; options given before NAME (deprecated) are taken as given after it."""
    experiment = EXPERIMENTS[args.experiment]
    for key, value in _given_first(args).items():
        option = flag(key)
        if key not in ("out", "kernels") and not reads(experiment, option):
            raise ConfigError(_explain(experiment.name)(option) or f"demo: {option} is not an option")
        print(f"warning: `robustvlm demo {option} {experiment.name}` is deprecated: write the options after the "
              f"demo's name (`robustvlm demo {experiment.name} {option}`)", file=sys.stderr)
        setattr(args, key, value)
    plan = plan_from(args, experiment)
    status = _on_kernels(args)
    if status is None:
        experiment.execute(plan, args.out)
    return status or 0


def _add_kernels(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    parser.add_argument("--kernels", dest=prefix + "kernels", choices=tuple(KERNEL_SETS), metavar="SET",
                        help="float kernels to run on: native (default, as the CPU allows) or avx2 (AVX2 kernels of "
                             "torch, MKL and oneDNN on an AVX-512 CPU: other float rounding, to check that a verdict "
                             "does not hang on it); recorded in results.json's machine record")


def add_demo(sub: SubParsers) -> None:
    default = EXPERIMENTS[DEFAULT]
    dm = sub.add_parser("demo", help=f"built-in demos; without a name, {default.summary}",
                        description="Built-in demos, one per experiment (`robustvlm demo NAME --help`: its "
                        "options); without a name, the default demo.", formatter_class=PlanHelpFormatter,
                        epilog=example("robustvlm demo --quick --out demo_out_quick"))
    add_plan_options(dm, default, BEFORE)
    add_data_root(dm)
    dm.add_argument("--out", dest=BEFORE + "out", metavar="OUT", type=output_folder, help=_out_help(default))
    _add_kernels(dm, BEFORE)
    for other in EXPERIMENTS.values():
        add_plan_options(dm, other, BEFORE, hidden=True)
    dm.set_defaults(func=_run_default, explain_option=_explain(DEFAULT))
    names = dm.add_subparsers(dest="experiment", metavar="NAME", title="demos")
    for name, experiment in EXPERIMENTS.items():
        parser = names.add_parser(name, help=experiment.summary, description=experiment.summary,
                                  formatter_class=PlanHelpFormatter, epilog=example(*experiment.example))
        add_plan_options(parser, experiment)
        if experiment.reads_fashion_mnist:
            add_data_root(parser)
        parser.add_argument("--out", type=output_folder, help=_out_help(experiment))
        _add_kernels(parser)
        parser.set_defaults(func=_run_named, experiment=name, explain_option=_explain(name))
