"""The options of the commands that read results files of other tools (`robustness fit`,
`robustness subsets`, `robustness convert`, `compare`): the format, the question counts the file
lacks, which lmms-eval run to read, whether a record left out is an error, and (convert) whether
scores that are no accuracy are read. `--format`'s choices and help come from the readers'
registry (`data.results.formats`)."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from robustvlm.data.results.formats import result_format_choices, result_format_help
from robustvlm.errors import ConfigError

if TYPE_CHECKING:
    from robustvlm.data.results import ReadOptions

N_QUESTIONS_HELP = ("BENCH=N: the number of questions of a benchmark whose file gives none and whose size the "
                    "standard table lacks (or a split other than the standard one); repeatable")

RUN_HELP = ("lmms-eval: read the run of this DATE (the prefix of its DATE_results.json, e.g. 20260101_120000) "
            "instead of the latest run of each task; runs are never pooled")
STRICT_HELP = "refuse a file with any record left out (by default they are listed on stderr and in the output JSON)"
NON_ACCURACY_HELP = ("also read scores that are no accuracy over a counted set (open_clip's mean per-class recall, "
                     "retrieval and worst-group columns), written with their measure and no question count")


def add_results_options(parser: argparse.ArgumentParser, *, counts: bool = True, non_accuracy: bool = False) -> None:
    """--format, --run, --strict, --n-questions (`counts`: where aggregate accuracies are read) and
    --allow-non-accuracy (`non_accuracy`)."""
    parser.add_argument("--format", default="auto", choices=result_format_choices(), help=result_format_help())
    if counts:
        parser.add_argument("--n-questions", action="append", default=[], metavar="BENCH=N", help=N_QUESTIONS_HELP)
    parser.add_argument("--run", metavar="DATE", help=RUN_HELP)
    parser.add_argument("--strict", action="store_true", help=STRICT_HELP)
    if non_accuracy:
        parser.add_argument("--allow-non-accuracy", action="store_true", help=NON_ACCURACY_HELP)


def read_options(args: argparse.Namespace) -> ReadOptions:
    """The reading options of the parsed `args` (ConfigError on a --run that is no DATE)."""
    from robustvlm.data.results import ReadOptions

    if args.run is not None and not re.fullmatch(r"[0-9A-Za-z._:T-]+(_[0-9A-Za-z._:T-]+)?", args.run):
        raise ConfigError(f"--run {args.run!r}: give the DATE that prefixes a run's files, e.g. 20260101_120000")
    return ReadOptions(run=args.run, allow_non_accuracy=getattr(args, "allow_non_accuracy", False), strict=args.strict)


def n_questions(args: argparse.Namespace) -> dict[str, int]:
    """{bench: questions} of the --n-questions options (ConfigError on a malformed one)."""
    out = {}
    for text in args.n_questions:
        bench, sep, value = text.rpartition("=")
        if not sep or not bench or not value.isdigit() or int(value) < 1:
            raise ConfigError(f"--n-questions {text!r}: write BENCH=N with N a positive whole number")
        out[bench] = int(value)
    return out
