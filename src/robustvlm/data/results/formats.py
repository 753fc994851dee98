"""The registry of results formats: one line per reader, with its name, its reader and detector,
and the words `--format`'s help gives it. Light (the readers import only the standard library),
so the command line builds `--format`'s choices and help from it: a reader registered here is
offered by every command that reads results files, with no other list to edit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from robustvlm.data.results import clip_benchmark, lmms_eval, long_csv, openclip, vlmevalkit
from robustvlm.data.results.table import ReadOptions, ResultTable


@dataclass(frozen=True)
class ResultFormat:
    """A results format: its reader (path, the user's reading options), its detector (whether
    an existing path is of it), what it is, and `help`: what `--format NAME` reads, in the words
    of the option's help."""

    read: Callable[[Path, ReadOptions], ResultTable]
    detect: Callable[[Path], bool]
    what: str
    help: str


def _no_options(read: Callable[[Path], ResultTable]) -> Callable[[Path, ReadOptions], ResultTable]:
    """A reader that takes no options, as the registry calls readers."""
    return lambda path, _options: read(path)


#: every results format by name, in the order detection tries them
RESULT_FORMATS: dict[str, ResultFormat] = {
    "robustvlm": ResultFormat(long_csv.read, long_csv.looks_like, "robustvlm's results CSV (mc eval)",
                              "mc eval's CSV"),
    "openclip": ResultFormat(openclip.read, openclip.looks_like, "open_clip's results table",
                             "open_clip's results table"),
    "clip_benchmark": ResultFormat(clip_benchmark.read, clip_benchmark.looks_like, "clip_benchmark's JSON or CSV",
                                   "its JSON, a folder of them or its build CSV"),
    "lmms_eval": ResultFormat(lmms_eval.read, lmms_eval.looks_like, "lmms-eval's results / samples",
                              "*_results.json / *_samples_*.jsonl or their folder"),
    "vlmevalkit": ResultFormat(_no_options(vlmevalkit.read), vlmevalkit.looks_like, "VLMEvalKit's sheets",
                               "prediction / _result sheets, _acc.csv or their folder"),
}


def result_format_choices() -> tuple[str, ...]:
    """"auto" and every registered format's name: what `--format` takes."""
    return ("auto", *RESULT_FORMATS)


def result_format_help() -> str:
    """`--format`'s help: every registered format with what it reads."""
    formats = ", ".join(f"{name} ({result_format.help})" for name, result_format in RESULT_FORMATS.items())
    return f"the results file's format: auto (detected), {formats}; see the results-files guide"
