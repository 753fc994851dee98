"""`robustvlm robustness convert`: another tool's results file rewritten as robustvlm's results
CSV (`model, family, bench, accuracy, n`, plus `n_from` and the reader's own columns), and its
per-question rows, where it has them, as JSONL (`model, bench, id, correct, env, ...`).

Benchmarks whose question count neither the file, the user nor the standard table gives are left
out of the CSV and named in the returned summary (the command prints them); when that leaves
nothing, the command refuses rather than write an empty CSV. `--benchmark` keeps only the
benchmarks named. Scores that are no accuracy over a counted set (read only with
`--allow-non-accuracy`: rows with `measure`) are written with an empty `n` and `n_from` "none",
never given a question count. The records the reader left out are printed (`data.results.skips`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from robustvlm.data.results import ReadOptions, fill_counts, read_results_file
from robustvlm.data.results.sizes import standard_size
from robustvlm.errors import ConfigError, DataError
from robustvlm.runs import check_output_file, write_output_file

CSV_COLUMNS = ("model", "family", "bench", "accuracy", "n", "n_from")


@dataclass(frozen=True)
class Converted:
    """What `convert_results` wrote: rows per file and the benchmarks left out for want of a count."""

    csv_rows: int
    question_rows: int
    left_out: list[str]


def convert_results(path: str | Path, out_csv: str | Path, *, fmt: str = "auto", benches: Sequence[str] = (),
                    n_questions: Mapping[str, int] | None = None,
                    questions_out: str | Path | None = None, options: ReadOptions | None = None) -> Converted:
    """Write the accuracies of `path` to `out_csv` (and its question rows to `questions_out`).
    Each file is written beside its name and renamed into place when complete; an existing one is
    replaced only when robustvlm wrote it (an earlier convert), never a user's file
    (`runs.write_output_file`, ConfigError)."""
    targets = [Path(t) for t in (out_csv, questions_out) if t is not None]
    for target in targets:
        check_output_file(target)
    if len(targets) == 2 and targets[0].absolute() == targets[1].absolute():
        raise ConfigError(f"--out and --questions both name {targets[0]}: give two files")
    table = read_results_file(path, fmt, options)
    rows = [r for r in table.accuracies if not benches or r["bench"] in benches]
    if not rows:
        raise DataError(f"no rows for bench(es) {list(benches)}", str(path))
    sizes = n_questions or {}
    for row in rows:
        if row.get("measure"):
            row["n_from"] = "none"
    countable = {r["bench"] for r in rows if r["n"] is not None or r.get("measure") or r["bench"] in sizes
                 or standard_size(r["bench"])}
    left_out = sorted({r["bench"] for r in rows} - countable)
    if benches and left_out:
        fill_counts(rows, left_out, sizes, str(path))  # a named bench without a count: its error
    kept = [r for r in rows if r["bench"] in countable]
    if not kept:
        raise DataError(f"no benchmark has a question count ({', '.join(left_out)}); nothing to write: give "
                        f"--n-questions '{left_out[0]}=N'", str(path))
    fill_counts(kept, countable, sizes, str(path))
    extra = list(dict.fromkeys(k for r in kept for k in r if k not in (*CSV_COLUMNS, "line")))
    _write_csv(Path(out_csv), kept, [*CSV_COLUMNS, *extra])
    questions = [q for q in table.questions if not benches or q["bench"] in benches]
    if questions_out is not None:
        write_output_file(Path(questions_out), lambda handle: handle.writelines(
            json.dumps({k: v for k, v in q.items() if k != "line"}) + "\n" for q in questions))
    return Converted(len(kept), len(questions) if questions_out is not None else 0, left_out)


def _write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    def write(handle: IO[str]) -> None:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    write_output_file(path, write)
