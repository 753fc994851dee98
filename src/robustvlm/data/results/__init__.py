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
one entry in `formats.RESULT_FORMATS` (its name, reader and `--format` help: the command line
offers it from there).
"""

from __future__ import annotations

from pathlib import Path

from robustvlm.data.results.formats import (
    RESULT_FORMATS,
    ResultFormat,
    result_format_choices,
    result_format_help,
)
from robustvlm.data.results.sizes import STANDARD_SIZES, fill_counts, standard_size
from robustvlm.data.results.skips import Skip, report_skips, skips_json
from robustvlm.data.results.table import ReadOptions, ResultTable
from robustvlm.errors import ConfigError, DataError


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
        raise ConfigError(f"unknown results format {fmt!r}; choose one of {', '.join(result_format_choices())}")
    options = options or ReadOptions()
    table = RESULT_FORMATS[detect_format(path) if fmt == "auto" else fmt].read(path, options)
    report_skips(table.skipped, strict=options.strict)
    return table


__all__ = ["RESULT_FORMATS", "STANDARD_SIZES", "DataError", "ReadOptions", "ResultFormat",
           "ResultTable", "Skip", "detect_format", "fill_counts", "read_results_file", "result_format_choices",
           "result_format_help", "skips_json", "standard_size"]
