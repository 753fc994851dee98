"""The `robustvlm` command line: parse, load config, call one function per subcommand.

Each command group lives in its own module (`data`, `train` with `study` and `sweep`, `grid`, `embed`,
`envs`, `evaluate`, `demo`, `mc`, `robustness`, `icl` with `diagnose`, `rm`, `zoo`, `compare`, `merge`,
`configs`), which registers its
subcommands with one `add_<command>(sub)` function; options shared by several commands are in
`options`. This module only assembles them: a new command is one module (copy the closest one)
and one entry in `COMMANDS`.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import sys
from pathlib import Path

from safetensors import SafetensorError

import robustvlm
from robustvlm.cli import (
    compare,
    configs,
    data,
    demo,
    embed,
    envs,
    evaluate,
    grid,
    icl,
    mc,
    merge,
    rm,
    robustness,
    train,
    zoo,
)
from robustvlm.cli.options import (
    IMAGE_ROOT_HELP,
    OUTSIDE_ROOT_HELP,
    RESUME_HELP,
    Parser,
    example,
    float_above,
    float_at_least,
    float_in_unit_interval,
    int_at_least,
    no_config_message,
)
from robustvlm.cli.output_checks import check_outputs_first
from robustvlm.data.provenance import ROOT_FROM_OPTION, clear_reads
from robustvlm.data.real_images import FASHION_ENV
from robustvlm.errors import MissingDataSource, RobustVLMError
from robustvlm.extras import MissingExtra
from robustvlm.plugins import load_plugins
from robustvlm.redact import redact
from robustvlm.runs import release_run_folders
from robustvlm.sharding import HelpersDone, begin_command

__all__ = [
    "COMMANDS", "IMAGE_ROOT_HELP", "OUTSIDE_ROOT_HELP", "RESUME_HELP", "build_parser", "float_above",
    "float_at_least", "float_in_unit_interval", "int_at_least", "main", "parse_command_line",
]

#: The top-level commands' registration functions, in the order `robustvlm --help` lists them.
COMMANDS = (
    data.add_data,
    train.add_train,
    embed.add_embed,
    envs.add_envs,
    evaluate.add_eval,
    train.add_study,
    train.add_sweep,
    grid.add_grid,
    demo.add_demo,
    mc.add_mc,
    robustness.add_robustness,
    icl.add_icl,
    icl.add_diagnose,
    rm.add_rm,
    compare.add_compare,
    merge.add_merge,
    zoo.add_zoo,
    configs.add_configs,
)


#: Errors of a write the machine refused (a full disk or quota, a read-only file system or folder, a
#: name too long): one line naming the file, exit 2; finished work stays (every output is atomic
#: or appended row by row, and a run resumes from its last complete checkpoint).
WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG)


#: How safetensors reports a failed write: its errors are no OSError, the OS error is in the text.
_SAFETENSORS_IO = re.compile(r'I/O error: (?P<reason>.*?) \(os error (?P<code>\d+)\)(?: at path "(?P<path>[^"]*)")?')


def os_error_of(err: SafetensorError) -> OSError | None:
    """The OS error a safetensors write failed with (`I/O error: REASON (os error N) at path
    "P"` in its message), or None when the message names none."""
    found = _SAFETENSORS_IO.search(str(err))
    return OSError(int(found["code"]), found["reason"], found["path"]) if found else None


def write_error_line(err: OSError, args: argparse.Namespace) -> str:
    """`cannot write FILE: REASON` and what is kept, for an OSError of WRITE_ERRORS (FILE: the
    error's file, else the command's output folder); `--resume` is advised only to a command
    that has it (the others resume, or start afresh, when run again as they were)."""
    outputs = [str(getattr(args, d)) for d in ("out", "to", "folder") if getattr(args, d, None) is not None]
    where = err.filename if err.filename is not None else f"in {outputs[0]}" if outputs else "an output file"
    again = "run again with --resume" if hasattr(args, "resume") else "run the same command again"
    return (f"cannot write {where}: {err.strerror or err}; the work finished before it is kept "
            f"(free space or choose a writable --out, then {again})")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="robustvlm",
        description="Measure and improve how vision-language models hold up under distribution shift.",
        epilog=example("robustvlm configs list", "robustvlm demo --quick --out demo_out_quick"),
    )
    parser.add_argument("--version", action="version", version=f"robustvlm {robustvlm.__version__}")
    sub = parser.add_subparsers(required=True)
    for add in COMMANDS:
        add(sub)
    check_outputs_first(parser)  # every --out is checked before any work (runs.check_output_folder)
    return parser


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse `argv`, taking key=value overrides anywhere on the line, as intermixed parsing does.

    argparse's `parse_intermixed_args` refuses parsers with subcommands, and plain parsing ends a
    `nargs="*"` positional at the first option: `train CONFIG --out DIR steps=5` leaves
    `steps=5` unrecognised. Those leftovers are appended to the command's overrides; a leftover
    option (`--x`), or one given to a command that takes no overrides, is still an error. An
    override may also stand before the config file (`train train.steps=3 CONFIG`): of the
    command's positional words, the one that is not `key=value` (or names an existing file) is
    the config.
    """
    args, extras = parser.parse_known_args(argv)
    stray = [e for e in extras if e.startswith("-") or not hasattr(args, "overrides")]
    if stray:
        explain = getattr(args, "explain_option", None)  # a command saying which commands read an option
        parser.error((explain and explain(stray[0])) or f"unrecognized arguments: {' '.join(stray)}")
    if extras:
        args.overrides = [*args.overrides, *extras]
    if hasattr(args, "config") and hasattr(args, "overrides"):
        words = [w for w in (args.config, *args.overrides) if w is not None]
        configs = [w for w in words if not _is_override(w)]
        if len(configs) > 1:
            parser.error(f"one config file expected, got {len(configs)}: {' '.join(configs)}")
        if not configs and not getattr(args, "config_optional", False):
            parser.error(no_config_message(words, getattr(args, "config_example", None)))
        args.config = configs[0] if configs else None
        args.overrides = [w for w in words if _is_override(w)]
    return args


def _is_override(word: str) -> bool:
    """Whether a positional word is a `key=value` override rather than a file name."""
    return re.match(r"[A-Za-z_][\w.-]*=", word) is not None and not Path(word).exists()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `robustvlm` console script."""
    try:
        load_plugins()  # before the parser: help texts and choices list what plugins add
    except RobustVLMError as err:
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 2
    args = parse_command_line(build_parser(), argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command line as given (`demo --kernels` re-runs it)
    clear_reads()  # a report lists the data its own command read (data.provenance)
    if getattr(args, "data_root", None) is not None:  # read by data.real_images, here and in workers
        os.environ[FASHION_ENV] = str(args.data_root.expanduser().resolve())
        os.environ[ROOT_FROM_OPTION] = "1"
    else:
        os.environ.pop(ROOT_FROM_OPTION, None)
    begin_command(args.argv, getattr(args, "shard", None))
    try:
        return args.func(args)
    except HelpersDone:  # a helper process of a launch: its share is scored, the main process summarises
        return 0
    except (MissingDataSource, MissingExtra) as err:  # not bad input: something to install
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 1
    except RobustVLMError as err:
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        again = "re-run with --resume" if hasattr(args, "resume") else "run the same command again"
        print(f"interrupted: finished work is kept; {again} to continue", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`robustvlm zoo list | head`): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, SafetensorError) as err:
        os_err = err if isinstance(err, OSError) else os_error_of(err)
        if os_err is None or os_err.errno not in WRITE_ERRORS:
            raise
        print(f"error: {redact(write_error_line(os_err, args))}", file=sys.stderr)
        return 2
    finally:
        release_run_folders()
