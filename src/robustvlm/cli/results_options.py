"""The options of the commands that read results files of other tools (`robustness fit`,
`robustness subsets`, `compare`): the format and the question counts the file lacks."""

from __future__ import annotations

import argparse

from robustvlm.errors import ConfigError

#: the results formats `--format` takes (kept in step with data.results.RESULT_FORMAT_CHOICES, which
#: tests/data/results/test_readers.py checks; the data package is imported only when a command runs)
RESULT_FORMAT_CHOICES = ("auto", "robustvlm", "openclip", "clip_benchmark", "lmms_eval", "vlmevalkit")

FORMAT_HELP = ("the results file's format: auto (detected), robustvlm (mc eval's CSV), openclip (open_clip's "
               "results table), clip_benchmark (its JSON, a folder of them or its build CSV), lmms_eval "
               "(*_results.json / *_samples_*.jsonl or their folder), vlmevalkit (prediction / _result sheets, "
               "_acc.csv or their folder); see the results-files guide")
N_QUESTIONS_HELP = ("BENCH=N: the number of questions of a benchmark whose file gives none and whose size the "
                    "standard table lacks (or a split other than the standard one); repeatable")


def add_results_options(parser: argparse.ArgumentParser, *, counts: bool = True) -> None:
    """--format, and --n-questions (`counts`: where aggregate accuracies are read)."""
    parser.add_argument("--format", default="auto", choices=RESULT_FORMAT_CHOICES, help=FORMAT_HELP)
    if counts:
        parser.add_argument("--n-questions", action="append", default=[], metavar="BENCH=N", help=N_QUESTIONS_HELP)


def n_questions(args: argparse.Namespace) -> dict[str, int]:
    """{bench: questions} of the --n-questions options (ConfigError on a malformed one)."""
    out = {}
    for text in args.n_questions:
        bench, sep, value = text.rpartition("=")
        if not sep or not bench or not value.isdigit() or int(value) < 1:
            raise ConfigError(f"--n-questions {text!r}: write BENCH=N with N a positive whole number")
        out[bench] = int(value)
    return out
