"""`robustvlm compare RUN_A RUN_B`: two models on the same questions, compared pair by pair.

A run is an `eval` folder (its predictions.jsonl; a per-sample metric from `scores`), an
`icl eval` folder (icl_predictions.jsonl; `correct`), an `mc eval` question file
(`<out>/<model>/<bench>.jsonl`; `correct`), or one model's per-question results of another tool
(lmms-eval samples, VLMEvalKit sheets: `data.results`; `correct`, ids "BENCH/ID"). Questions are paired by id (and rotation, shots and
policy where the rows have them); both runs must hold the same questions, and rows whose metric
is undecided (a CEE tie) in either run are left out and counted. A question held twice in one
run, or a score that is not a finite number, is a DataError naming the file and the question;
input files are only read (`runs.read_input_jsonl`). Per group (environment, plus
shots and policy for in-context runs) and over all questions: `analysis.paired.compare_paired`.

Writes in `--out` (when given; claimed as every command's run folder is, `runs.claim_run_folder`:
a folder holding an earlier comparison needs `--resume`):
config.resolved.yaml (the settings), compare.json (every group's figures) and compare.md (the
printed table).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robustvlm.analysis.paired import PairedComparison, compare_paired
from robustvlm.data.results import ReadOptions, Skip, read_results_file, skips_json
from robustvlm.errors import ConfigError, DataError
from robustvlm.report.paired_table import paired_cells, paired_header
from robustvlm.report.tables import markdown_table
from robustvlm.runs import claim_run_folder, read_input_jsonl

RUN_FILES = ("predictions.jsonl", "icl_predictions.jsonl")
KEY_FIELDS = ("id", "rotation", "shots", "policy")
ALL = "all"


@dataclass
class Comparison:
    """What `compare_runs` found: the metric compared, the groups' comparisons (ALL last), the
    questions left out as undecided in either run and the records the readers of another tool's
    files left out (`data.results.skips`)."""

    metric: str
    cluster: str | None
    groups: dict[str, PairedComparison]
    undecided: int
    skipped: list[Skip]

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "cluster": self.cluster, "undecided": self.undecided,
                "groups": {g: c.to_dict() for g, c in self.groups.items()}, "skipped": skips_json(self.skipped)}


def _is_own_run(path: Path) -> bool:
    """An eval / icl eval folder or an mc eval question file (not another tool's results)."""
    if path.is_dir():
        return any((path / name).is_file() for name in RUN_FILES)
    return path.suffix == ".jsonl" and "_samples_" not in path.name


def imported_rows(path: Path, fmt: str = "auto", options: ReadOptions | None = None) -> tuple[list[dict], list[Skip]]:
    """(the per-question rows of one model's results file of another tool (`data.results`: lmms-eval
    samples, VLMEvalKit sheets) as compare's rows: id "BENCH/ID", correct, env; the records the
    reader left out). A question held twice is a DataError naming it."""
    table = read_results_file(path, fmt, options)
    models = sorted({q["model"] for q in table.questions})
    if len(models) != 1:
        raise DataError(f"{path}: compare needs the per-question results of one model; found "
                        f"{len(models)} ({', '.join(models[:3]) or 'none: aggregate results only'})")
    first: dict[tuple[str, str], int] = {}
    for i, q in enumerate(table.questions):
        earlier = first.setdefault((q["bench"], q["id"]), i)
        if earlier != i:
            raise DataError(f"question {q['bench']}/{q['id']} is held twice (first at {table.questions[earlier]['line']})"
                            ": a run scores each question once", str(path), q["line"])
    rows = [{**{k: v for k, v in q.items() if k not in ("model", "line")}, "id": f"{q['bench']}/{q['id']}"}
            for q in table.questions]
    return rows, table.skipped


def run_rows(run: str | Path, fmt: str = "auto",
             options: ReadOptions | None = None) -> tuple[Path, list[dict], list[Skip]]:
    """(the file read, its rows, the records its reader left out) of an eval / icl eval folder, an
    mc eval question file, or (`fmt` named, or a path of another tool) one model's per-question
    results of another tool."""
    path = Path(run)
    if path.exists() and (fmt != "auto" or not _is_own_run(path)):
        return (path, *imported_rows(path, fmt, options))
    if path.is_dir():
        found = [path / name for name in RUN_FILES if (path / name).is_file()]
        if not found:
            raise ConfigError(f"{path}: no {' or '.join(RUN_FILES)}; pass an eval or icl eval folder, "
                              "or an mc eval question file (<out>/<model>/<bench>.jsonl)")
        path = found[0]
    elif not path.is_file():
        raise ConfigError(f"{path}: no such run folder or file")
    numbered = read_input_jsonl(path, "run file")
    if not numbered:
        raise DataError(f"{path}: no scored questions")
    first: dict[tuple, int] = {}
    for line, row in numbered:
        earlier = first.setdefault(_key(row), line)
        if earlier != line:
            raise DataError(f"question {row.get('id')!r} is held twice (lines {earlier} and {line}): a run scores "
                            "each question once", str(path), line)
    return path, [row for _, row in numbered], []


def _key(row: Mapping) -> tuple:
    return tuple(str(row[f]) for f in KEY_FIELDS if f in row)


def _group(row: Mapping) -> str:
    env = str(row.get("env", row.get("domain", ALL)))
    return f"{env} k={row['shots']} {row['policy']}" if "shots" in row else env


def _metric_value(row: Mapping, metric: str, where: Path) -> float | None:
    value = row.get("correct") if metric == "correct" else (row.get("scores") or {}).get(metric, "absent")
    if value == "absent":
        raise DataError(f"{where}: question {row.get('id')!r} has no score {metric!r}")
    if value is None:
        return None
    if not isinstance(value, (int, float)) or not math.isfinite(value):  # bools are 0/1 scores
        raise DataError(f"{where}: question {row.get('id')!r} has the score {metric!r} = {value!r}: scores must "
                        "be finite numbers")
    return float(value)


def pick_metric(rows: Sequence[Mapping], metric: str | None, where: Path) -> str:
    """`metric`, or `correct` where rows have it, or the only metric in their `scores`."""
    names = sorted({"correct"} if "correct" in rows[0] else set(rows[0].get("scores") or {}))
    if metric is None:
        if len(names) != 1:
            raise ConfigError(f"{where}: pass --metric, one of {', '.join(names) or '(none)'}")
        return names[0]
    if metric not in names:
        raise ConfigError(f"--metric {metric!r}: {where} has {', '.join(names) or 'no metric'}")
    return metric


def compare_runs(
    run_a: str | Path, run_b: str | Path, *, metric: str | None = None, cluster: str | None = None,
    power_delta: float = 0.05, n_boot: int = 2000, fmt: str = "auto", options: ReadOptions | None = None,
) -> Comparison:
    """Pair the two runs' questions and compare them per group and over all (see the module doc)."""
    path_a, rows_a, skipped_a = run_rows(run_a, fmt, options)
    path_b, rows_b, skipped_b = run_rows(run_b, fmt, options)
    metric = pick_metric(rows_a, metric, path_a)
    pick_metric(rows_b, metric, path_b)
    by_key_b = {_key(r): r for r in rows_b}
    keys_a = {_key(r) for r in rows_a}
    missing = [k for k in by_key_b if k not in keys_a] + [_key(r) for r in rows_a if _key(r) not in by_key_b]
    if missing:
        raise DataError(f"{path_a} and {path_b} do not hold the same questions ({len(missing)} in only one, "
                        f"e.g. {missing[0]}): compare runs on the same data")
    grouped: dict[str, list[tuple[float, float, str]]] = {}
    undecided = 0
    for row in rows_a:
        other = by_key_b[_key(row)]
        a, b = _metric_value(row, metric, path_a), _metric_value(other, metric, path_b)
        if a is None or b is None:
            undecided += 1
            continue
        label = _cluster_label(row, cluster, path_a)
        for group in dict.fromkeys((_group(row), ALL)):  # rows without an environment: ALL once
            grouped.setdefault(group, []).append((a, b, label))
    if ALL not in grouped:
        raise DataError(f"{path_a}, {path_b}: no question decided in both runs")
    order = [*sorted(g for g in grouped if g != ALL), ALL]
    groups = {g: compare_paired([a for a, _, _ in grouped[g]], [b for _, b, _ in grouped[g]],
                                clusters=[c for _, _, c in grouped[g]] if cluster else None,
                                power_delta=power_delta, n_boot=n_boot)
              for g in order}
    return Comparison(metric, cluster, groups, undecided, [*skipped_a, *skipped_b])


def _cluster_label(row: Mapping, cluster: str | None, where: Path) -> str:
    if cluster is None:
        return ""
    if cluster not in row:
        raise ConfigError(f"--cluster {cluster!r}: question {row.get('id')!r} of {where} has no such field "
                          f"(fields: {', '.join(sorted(row))})")
    return str(row[cluster])


def comparison_table(comparison: Comparison) -> str:
    """Markdown: per group, A and B, the difference with its interval and clustered SE, the
    discordant counts and McNemar p (0/1 scores), and the questions needed at 80% power."""
    delta = next(iter(comparison.groups.values())).power_delta
    rows = [[group, *paired_cells(c)] for group, c in comparison.groups.items()]
    note = f"metric: {comparison.metric}"
    if comparison.cluster:
        note += f"; standard errors and intervals clustered by {comparison.cluster!r}"
    if comparison.undecided:
        note += f"; {comparison.undecided} question(s) undecided in either run left out"
    return markdown_table(["group", *paired_header(delta)], rows) + "\n\n" + note


def write_comparison(
    comparison: Comparison, out: Path, settings: Mapping[str, Any], *, resume: bool = False
) -> tuple[Path, Path]:
    """config.resolved.yaml, compare.json and compare.md in `out`, claimed as a run folder (an
    earlier comparison there is replaced only with `resume` and the same settings)."""
    claim_run_folder(out, settings, command="compare", resume=resume)
    (out / "compare.json").write_text(json.dumps(comparison.to_dict(), indent=2) + "\n", encoding="utf-8")
    (out / "compare.md").write_text("# Paired comparison\n\n" + comparison_table(comparison) + "\n",
                                    encoding="utf-8")
    return out / "compare.json", out / "compare.md"
