"""Readers of the field's results files, one registry: `robustness fit` and `compare` take any
of them (detected, or named with `--format`).

| name | file | per question |
|---|---|---|
| `robustvlm` | this project's results CSV (`mc eval`) | no |
| `openclip` | open_clip's `docs/openclip_results.csv` (wide: a column per dataset) | no |
| `clip_benchmark` | clip_benchmark's JSON per (model, dataset), a folder of them, its `build` CSV | no |
| `lmms_eval` | lmms-eval's `*_results.json` and `*_samples_TASK.jsonl` (`--log_samples`) | yes |
| `vlmevalkit` | VLMEvalKit's prediction / `_result` sheets (.xlsx/.csv/.tsv) and `_acc.csv` | yes |

Each reader returns a `ResultTable` (table.py); missing question counts come from
`sizes.fill_counts`; the records a reader leaves out are listed (`skips`: on stderr, in the
command's JSON; `--strict` refuses them). Files are read through `text` (a size cap, UTF-8, CSV
rows as long as their header). Adding a format is one module with `looks_like` and `read`, and
one entry in `RESULT_FORMATS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from robustvlm.data.results import clip_benchmark, lmms_eval, long_csv, openclip, vlmevalkit
from robustvlm.data.results.sizes import STANDARD_SIZES, fill_counts, standard_size
from robustvlm.data.results.skips import Skip, report_skips, skips_json
from robustvlm.data.results.table import ReadOptions, ResultTable
from robustvlm.errors import ConfigError, DataError


@dataclass(frozen=True)
class ResultFormat:
    """A results format: its reader (path, the user's reading options) and its detector (whether
    an existing path is of it)."""

    read: Callable[[Path, ReadOptions], ResultTable]
    detect: Callable[[Path], bool]
    what: str


def _no_options(read: Callable[[Path], ResultTable]) -> Callable[[Path, ReadOptions], ResultTable]:
    """A reader that takes no options, as the registry calls readers."""
    return lambda path, _options: read(path)


#: every results format by name, in the order detection tries them
RESULT_FORMATS: dict[str, ResultFormat] = {
    "robustvlm": ResultFormat(long_csv.read, long_csv.looks_like, "robustvlm's results CSV (mc eval)"),
    "openclip": ResultFormat(openclip.read, openclip.looks_like, "open_clip's results table"),
    "clip_benchmark": ResultFormat(clip_benchmark.read, clip_benchmark.looks_like, "clip_benchmark's JSON or CSV"),
    "lmms_eval": ResultFormat(lmms_eval.read, lmms_eval.looks_like, "lmms-eval's results / samples"),
    "vlmevalkit": ResultFormat(_no_options(vlmevalkit.read), vlmevalkit.looks_like, "VLMEvalKit's sheets"),
}
RESULT_FORMAT_CHOICES = ("auto", *RESULT_FORMATS)


def detect_format(path: Path) -> str:
    """The name of the first format whose detector claims `path`; a .csv none claims is read as
    robustvlm's (whose reader names the missing columns); ConfigError otherwise."""
    for name, result_format in RESULT_FORMATS.items():
        if result_format.detect(path):
            return name
    if path.is_file() and path.suffix.lower() == ".csv":
        return "robustvlm"
    raise ConfigError(f"{path}: not a results file robustvlm knows ({', '.join(RESULT_FORMATS)}); "
                      "name its format with --format")


def read_results_file(path: str | Path, fmt: str = "auto", options: ReadOptions | None = None) -> ResultTable:
    """The results at `path` in format `fmt` ("auto": detected), read with the user's `options`;
    its skipped records printed on stderr (`options.strict`: a DataError naming the first instead)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such file or folder")
    if fmt != "auto" and fmt not in RESULT_FORMATS:
        raise ConfigError(f"unknown results format {fmt!r}; choose one of {', '.join(RESULT_FORMAT_CHOICES)}")
    options = options or ReadOptions()
    table = RESULT_FORMATS[detect_format(path) if fmt == "auto" else fmt].read(path, options)
    report_skips(table.skipped, strict=options.strict)
    return table


__all__ = ["RESULT_FORMATS", "RESULT_FORMAT_CHOICES", "STANDARD_SIZES", "DataError", "ReadOptions", "ResultFormat",
           "ResultTable", "Skip", "detect_format", "fill_counts", "read_results_file", "skips_json", "standard_size"]
