"""VLMEvalKit's output (open-compass/VLMEvalKit): under `WORK_DIR/MODEL/` (its files are links to
`WORK_DIR/MODEL/EVAL_ID/`, where EVAL_ID is `T` + the run's date) `run.py` writes the prediction
sheet `MODEL_DATASET.xlsx` (`.tsv` by PRED_FORMAT), one row per question with `index`,
`question`, the options `A`, `B`, ..., `answer`, `prediction` and, where the dataset has them,
`category`, `l2-category`, `split`; a multiple-choice evaluation adds
`MODEL_DATASET_JUDGE_result.xlsx` (the scored rows with `hit`, 0/1, and `log`) and
`MODEL_DATASET_acc.csv` (`report_acc`: one row per `split`, `Overall` and one column per
category, fractions).

Read: one sheet (.xlsx, .csv, .tsv) or `_acc.csv`, a model's folder, or a work folder (a
folder of model folders: every model in one table). MODEL is always the name of the folder that
holds the file (or of its parent, for an EVAL_ID folder), never split from the file name: both
names may hold `_` (`llava_v1.5_7b_MMBench_DEV_EN`); a file outside its model's folder is
refused. DATASET is the rest of the file name.

Per question: id = `index`, env = `category` (else `split`, else the dataset); `category`,
`l2-category` and `split` are kept for subset lines. Correct = `hit` of a `_result` sheet;
in a prediction sheet without one, as VLMEvalKit's exact matching scores it
(`vlmevalkit_match`): the option letter its `can_infer` reads from the prediction equals the
answer; a circular dataset (MMBench, CCBench, ...) has one question per `index % 1e6`, right
only if every rotation is right. Where VLMEvalKit would ask its LLM judge (no option read), the
sheet is refused: run VLMEvalKit's evaluation and read its `_result` sheet. An `_acc.csv` gives
one accuracy per split (no question count) for datasets without a sheet beside it: the bench
is the dataset, or `DATASET (SPLIT)` when the file holds several splits. An `index` held twice
for one model and dataset (two sheets, or one sheet) is refused.

Sheets of datasets VLMEvalKit does not score as multiple choice (no `index`/`answer`/`prediction`
columns: score files such as `MODEL_MME_score.csv`; or no option columns `A`, `B`: yes/no and
open datasets, their `_auxmatch` and judge sheets) are skipped and listed (`table.skip`), so the
multiple-choice datasets beside them are read; `--strict` refuses them. Files that are no sheet
(VLMEvalKit's `.pkl` caches, `.json` scores, logs) are not read.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
import zlib
from collections import defaultdict
from pathlib import Path

from robustvlm.data.results.table import (
    ResultTable,
    accuracies_from_questions,
    accuracy_row,
    fraction,
)
from robustvlm.data.results.text import csv_header, read_text
from robustvlm.data.results.vlmevalkit_match import ROTATION_STRIDE, infer, is_circular
from robustvlm.errors import DataError
from robustvlm.extras import require

SHEETS = (".xlsx", ".csv", ".tsv")
QUESTION_COLUMNS = ("index", "answer", "prediction")
KEPT_COLUMNS = ("category", "l2-category", "split")
OPTION_LETTERS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_RESULT = re.compile(r"_(exact_matching|[A-Za-z0-9.\-]+)_result$")
_EVALUATE = "run VLMEvalKit's evaluation (run.py --mode eval) and read its _result sheet or _acc.csv"


def _table_rows(path: Path) -> list[tuple[int, dict]]:
    """The sheet's (line, {column: text}) rows (header on line 1; blank rows left out). DataError
    naming the file when it cannot be read, and the line of a row with more or fewer cells than
    the header in a .csv / .tsv (an .xlsx row ends at its last filled cell)."""
    values = _xlsx_values(path) if path.suffix.lower() == ".xlsx" else _text_values(path)
    if not values:
        return []
    header = [h.strip() for h in values[0]]
    rows = []
    for line, row in enumerate(values[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header) and (path.suffix.lower() != ".xlsx" or len(row) > len(header)):
            raise DataError(f"a row of {len(row)} cells under a header of {len(header)}", str(path), line)
        rows.append((line, dict(zip(header, [*row, *[""] * (len(header) - len(row))]))))
    return rows


def _xlsx_values(path: Path) -> list[list[str]]:
    require("results", f"reading {path.name}")
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
        try:
            if book.active is None:
                raise ValueError("no worksheet")
            return [["" if v is None else str(v) for v in row] for row in book.active.iter_rows(values_only=True)]
        finally:
            book.close()
    except (zipfile.BadZipFile, zlib.error, InvalidFileException, KeyError, OSError, EOFError, SyntaxError,
            ValueError) as err:
        raise DataError(f"not a readable .xlsx file (empty, cut short or not a workbook: {err})", str(path)) from None


def _text_values(path: Path) -> list[list[str]]:
    text = read_text(path, "VLMEvalKit sheet")
    try:
        return list(csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(path)))
    except csv.Error as err:
        raise DataError(f"not a readable {path.suffix} sheet ({err})", str(path)) from None


def _header(path: Path) -> set[str]:
    """The columns of a .csv / .tsv for detection (empty when it cannot be read)."""
    return {h.strip() for h in csv_header(path, _delimiter(path)) or []}


def _delimiter(path: Path) -> str:
    return "\t" if path.suffix.lower() == ".tsv" else ","


def _is_acc(path: Path) -> bool:
    return path.stem.endswith("_acc") and path.suffix.lower() == ".csv"


def _sheets(folder: Path) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in SHEETS)


def looks_like(path: Path) -> bool:
    """An .xlsx, a .csv/.tsv with `index`, `answer`, `prediction` (or an `_acc.csv` with
    `Overall`), or a model or work folder holding one."""
    if path.is_dir():
        return any(looks_like(f) for folder in model_folders(path) for f in _sheets(folder))
    if path.suffix.lower() == ".xlsx":
        return True
    header = _header(path) if path.suffix.lower() in SHEETS else set()
    return "Overall" in header if _is_acc(path) else set(QUESTION_COLUMNS) <= header


def model_and_dataset(path: Path, stem: str) -> tuple[str, str]:
    """(MODEL, DATASET) of a file whose name (without the `_acc` / `_JUDGE_result` suffix) is
    `stem`: MODEL the folder (or its parent) whose name prefixes `stem`; DataError otherwise."""
    for folder in (path.parent, path.parent.parent):
        if folder.name and stem.startswith(folder.name + "_"):
            return folder.name, stem[len(folder.name) + 1 :]
    raise DataError("cannot tell the model from the file name: VLMEvalKit writes WORK_DIR/MODEL/MODEL_DATASET "
                    "and both names may hold '_'; keep the file in its model's folder", str(path))


def model_folders(path: Path) -> list[Path]:
    """The folders whose sheets are read: `path` itself when it holds sheets (a model folder), else
    each model folder in it (a work folder). A model folder without sheets of its own (no links)
    is read from its latest EVAL_ID folder; folders without sheets (logs) hold no model."""
    if _sheets(path):
        return [path]
    found = []
    for folder in sorted(d for d in path.iterdir() if d.is_dir()):
        runs = [d for d in sorted(folder.iterdir()) if d.is_dir() and _sheets(d)] if not _sheets(folder) else []
        if _sheets(folder) or runs:
            found.append(folder if _sheets(folder) else runs[-1])
    return found


def read(path: Path) -> ResultTable:
    """Question rows of every sheet and accuracy rows (see the module doc)."""
    table = ResultTable()
    for folder in model_folders(path) if path.is_dir() else [path.parent]:
        files = _sheets(folder) if path.is_dir() else [path]
        _read_model_files(files, table)
    table.accuracies = accuracies_from_questions(table.questions) + table.accuracies
    if not table.accuracies:
        left_out = f" ({len(table.skipped)} sheet(s) left out, the first: {table.skipped[0].line()})" \
            if table.skipped else ""
        raise DataError(f"no VLMEvalKit multiple-choice sheet or _acc.csv{left_out}", str(path))
    return table


def _read_model_files(files: list[Path], table: ResultTable) -> None:
    """Add the question rows of `files` (one model's sheets) to `table`, and the `_acc.csv` rows of
    datasets none of its sheets holds."""
    results = {f for f in files if _RESULT.search(f.stem)}
    with_verdicts = {_RESULT.sub("", f.stem) for f in results}
    covered: dict[tuple[str, str], Path] = {}
    for file in files:
        if _is_acc(file) or (file not in results and file.stem in with_verdicts):
            continue  # an _acc.csv is read below; a prediction sheet whose _result sheet is here: that one
        rows = _question_rows(file, table)
        if not rows:
            continue  # a sheet of a dataset not scored as multiple choice: listed in table.skipped
        key = (rows[0]["model"], rows[0]["bench"])
        if key in covered:
            raise DataError(f"a second sheet of {key[0]} on {key[1]} (the first: {covered[key].name}): pass the one "
                            "to read", str(file))
        covered[key] = file
        table.questions.extend(rows)
    for file in (f for f in files if _is_acc(f)):
        table.accuracies.extend(r for r in _acc_rows(file) if (r["model"], r["dataset"]) not in covered)


def _question_rows(file: Path, table: ResultTable) -> list[dict]:
    """The questions of a prediction or `_result` sheet; none, and the sheet listed in
    `table.skipped`, where it is not one of a multiple-choice dataset (module doc)."""
    source = str(file)
    rows = _table_rows(file)
    if not rows:
        raise DataError("not a VLMEvalKit prediction sheet: no rows", source, 1)
    columns = rows[0][1]
    missing = [c for c in QUESTION_COLUMNS if c not in columns]
    if missing:
        table.skip(source, "header", f"no column(s) {', '.join(missing)}: not a multiple-choice prediction sheet "
                   "(a score or judge file of a dataset VLMEvalKit scores otherwise)")
        return []
    if "hit" not in columns and not {"A", "B"} <= columns.keys():
        table.skip(source, "header", "no option columns (A, B, ...): not a multiple-choice dataset; VLMEvalKit "
                   "scores it by its own rule or LLM judge, which robustvlm does not repeat")
        return []
    model, dataset = model_and_dataset(file, _RESULT.sub("", file.stem))
    _refuse_duplicates(rows, source)
    if "hit" in columns:
        return [_question(row, model, dataset, fraction(row["hit"], "hit", source, line), source, line)
                for line, row in rows]
    return _scored_predictions(rows, model, dataset, source)


def _question(row: dict, model: str, dataset: str, correct: float, source: str, line: int) -> dict:
    if not row["index"].strip():
        raise DataError("a question without index", source, line)
    kept = {c: row[c] for c in KEPT_COLUMNS if c in row}
    env = kept.get("category") or kept.get("split") or dataset
    return {"model": model, "bench": dataset, "id": row["index"].strip(), "correct": correct, "env": env,
            "line": line, **kept}


def _scored_predictions(rows: list[tuple[int, dict]], model: str, dataset: str, source: str) -> list[dict]:
    """A prediction sheet's questions scored as VLMEvalKit's exact matching scores them (module
    doc): each row's verdict, rotations of a circular dataset combined."""
    if "MMMU" in dataset:
        raise DataError(f"VLMEvalKit re-formulates {dataset}'s open questions before scoring; {_EVALUATE}", source)
    verdicts = [(line, row, _verdict(row, source, line)) for line, row in rows]
    if not is_circular(dataset):
        return [_question(row, model, dataset, float(_decided(ok, row, source, line)), source, line)
                for line, row, ok in verdicts]
    groups: dict[int, list[tuple[int, dict, bool | None]]] = defaultdict(list)
    for line, row, ok in verdicts:
        groups[_integer_index(row["index"], source, line) % ROTATION_STRIDE].append((line, row, ok))
    out = []
    for line, row, _ in sorted(verdicts, key=lambda v: _integer_index(v[1]["index"], source, v[0])):
        index = _integer_index(row["index"], source, line)
        if index % ROTATION_STRIDE != index:
            continue  # a rotation: scored with its question
        rotations = [ok for _, _, ok in groups[index]]
        if False in rotations:
            correct = 0.0  # VLMEvalKit stops at the first rotation read wrong, judge or not
        else:
            undecided = next(((ln, r) for ln, r, ok in groups[index] if ok is None), None)
            correct = 1.0 if undecided is None else float(_decided(None, undecided[1], source, undecided[0]))
        out.append(_question(row, model, dataset, correct, source, line))
    if not out:
        raise DataError(f"no question of circular {dataset} has its first rotation (an index below {ROTATION_STRIDE}), "
                        "by which VLMEvalKit counts it", source)
    return out


def _verdict(row: dict, source: str, line: int) -> bool | None:
    """Whether the option VLMEvalKit reads from the row's prediction is its answer (None: none read)."""
    answer = row["answer"].strip()
    choices = {letter: row[letter] for letter in OPTION_LETTERS if row.get(letter, "").strip()}
    if not answer or len(choices) < 2:
        raise DataError(f"{'no answer' if not answer else 'no option columns (A, B, ...)'}: not a multiple-choice "
                        f"row VLMEvalKit scores by exact matching; {_EVALUATE}", source, line)
    option = infer(row["prediction"] if row["prediction"].strip() else "nan", choices)
    return None if option is None else option == answer


def _decided(ok: bool | None, row: dict, source: str, line: int) -> bool:
    if ok is None:
        raise DataError(f"VLMEvalKit reads no option from the prediction {row['prediction'][:60]!r} and would ask its "
                        f"LLM judge; {_EVALUATE}", source, line)
    return ok


def _integer_index(text: str, source: str, line: int) -> int:
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not number.is_integer() or number < 0:
        raise DataError(f"index {text!r}: VLMEvalKit's circular datasets need whole-number indices", source, line)
    return int(number)


def _refuse_duplicates(rows: list[tuple[int, dict]], source: str) -> None:
    """DataError naming the index a sheet holds twice (and both lines)."""
    first: dict[str, int] = {}
    for line, row in rows:
        earlier = first.setdefault(row["index"].strip(), line)
        if earlier != line:
            raise DataError(f"index {row['index'].strip()} is held twice (lines {earlier} and {line}): VLMEvalKit "
                            "scores each question once", source, line)


def _acc_rows(file: Path) -> list[dict]:
    source = str(file)
    model, dataset = model_and_dataset(file, file.stem.removesuffix("_acc"))
    rows = _table_rows(file)
    if not rows or "Overall" not in rows[0][1]:
        raise DataError("not a VLMEvalKit _acc.csv: no Overall column", source, 1)
    out = []
    for line, row in rows:
        split = (row.get("split") or "none").strip()
        bench = dataset if len(rows) == 1 else f"{dataset} ({split})"
        out.append(accuracy_row(model, model, bench, fraction(row["Overall"], "Overall", source, line), None, line,
                                dataset=dataset))
    return out
