"""VLMEvalKit's output (open-compass/VLMEvalKit): under `WORK_DIR/MODEL/` (or `WORK_DIR/MODEL/EVAL_ID/`)
its `run.py` writes the prediction sheet `MODEL_DATASET.xlsx` (`.tsv` or `.json` by PRED_FORMAT),
one row per question with `index`, `question`, the options `A`, `B`, ..., `answer`, `prediction`
and, where the dataset has them, `category`, `l2-category`, `split`; a multiple-choice
evaluation adds `MODEL_DATASET_JUDGE_result.xlsx` (the same rows plus `hit`, 0/1, and `log`)
and `MODEL_DATASET_acc.csv` (one row per `split` with `Overall` and one column per category,
fractions).

Read: one sheet (.xlsx, .csv, .tsv), an `_acc.csv`, or a folder of them. MODEL is the name of
the folder (or of its parent) that prefixes the file name, else the file name up to its first
underscore; DATASET is the rest. Per question: id = `index`, correct = `hit` where the sheet has
it, else whether the prediction names the answer's option (the answer letter, alone or as "B.",
"(B)", "B) ...", or the option's text; VLMEvalKit's own matcher is more lenient, so prefer its
`_result` sheet), env = `category` (else `split`, else the dataset); `category`, `l2-category`
and `split` are kept for subset lines. An `_acc.csv` gives one accuracy row per split (no
question count) and is used only for datasets without a sheet in the same folder.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from robustvlm.data.results.table import (
    ResultTable,
    accuracies_from_questions,
    accuracy_row,
    fraction,
)
from robustvlm.errors import DataError
from robustvlm.extras import require

SHEETS = (".xlsx", ".csv", ".tsv")
QUESTION_COLUMNS = ("index", "answer", "prediction")
KEPT_COLUMNS = ("category", "l2-category", "split")
_RESULT = re.compile(r"_(exact_matching|[A-Za-z0-9.\-]+)_result$")
_LETTER = re.compile(r"^\(?([A-Z])\)?(?:[.:)\s]|$)")


def _table_rows(path: Path) -> list[dict]:
    """The sheet's rows as {column: text} (header on its first row)."""
    if path.suffix.lower() == ".xlsx":
        require("results", f"reading {path.name}")
        import openpyxl

        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
        values = [["" if v is None else str(v) for v in row] for row in book.active.iter_rows(values_only=True)]
        book.close()
    else:
        with path.open(encoding="utf-8-sig", newline="") as f:
            values = list(csv.reader(f, delimiter="\t" if path.suffix.lower() == ".tsv" else ","))
    if not values:
        return []
    header = [h.strip() for h in values[0]]
    return [dict(zip(header, row)) for row in values[1:] if any(cell.strip() for cell in row)]


def _header(path: Path) -> set[str]:
    try:
        rows = _table_rows(path) if path.suffix.lower() != ".xlsx" else [{}]
    except (OSError, UnicodeDecodeError, csv.Error):
        return set()
    return set(rows[0]) if rows else set()


def _is_acc(path: Path) -> bool:
    return path.stem.endswith("_acc") and path.suffix.lower() == ".csv"


def looks_like(path: Path) -> bool:
    """An .xlsx, a .csv/.tsv with `index`, `answer`, `prediction` (or an `_acc.csv` with
    `Overall`), or a folder holding one."""
    if path.is_dir():
        return any(looks_like(f) for f in sorted(path.iterdir()) if f.suffix.lower() in SHEETS)
    if path.suffix.lower() == ".xlsx":
        return True
    header = _header(path) if path.suffix.lower() in SHEETS else set()
    return "Overall" in header if _is_acc(path) else set(QUESTION_COLUMNS) <= header


def model_and_dataset(path: Path, stem: str) -> tuple[str, str]:
    """(MODEL, DATASET) of a file whose name (without the `_acc` / `_JUDGE_result` suffix) is `stem`."""
    for folder in (path.parent, path.parent.parent):
        if folder.name and stem.startswith(folder.name + "_"):
            return folder.name, stem[len(folder.name) + 1 :]
    model, _, dataset = stem.partition("_")
    return model, dataset or stem


def read(path: Path) -> ResultTable:
    """Question rows of every sheet and accuracy rows (see the module doc)."""
    files = sorted(f for f in path.iterdir() if f.suffix.lower() in SHEETS) if path.is_dir() else [path]
    table = ResultTable()
    results = {f for f in files if _RESULT.search(f.stem)}
    with_verdicts = {_RESULT.sub("", f.stem) for f in results}
    for file in files:
        if _is_acc(file) or (file not in results and file.stem in with_verdicts):
            continue  # an _acc.csv is read below; a prediction sheet whose _result sheet is here: that one
        table.questions.extend(_question_rows(file))
    table.accuracies = accuracies_from_questions(table.questions)
    covered = {(r["model"], r["bench"]) for r in table.accuracies}
    for file in (f for f in files if _is_acc(f)):
        table.accuracies.extend(r for r in _acc_rows(file) if (r["model"], r["dataset"]) not in covered)
    if not table.accuracies:
        raise DataError("no VLMEvalKit prediction sheet or _acc.csv", str(path))
    return table


def _question_rows(file: Path) -> list[dict]:
    source = str(file)
    try:
        rows = _table_rows(file)
    except (OSError, UnicodeDecodeError, csv.Error, ValueError, KeyError) as err:
        raise DataError(f"cannot read the sheet ({err})", source) from err
    missing = [c for c in QUESTION_COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise DataError(f"not a VLMEvalKit prediction sheet: {'no rows' if not rows else f'no column(s) {missing}'}",
                        source, 1)
    model, dataset = model_and_dataset(file, _RESULT.sub("", file.stem))
    return [_question(row, model, dataset, source, line) for line, row in enumerate(rows, start=2)]


def _question(row: dict, model: str, dataset: str, source: str, line: int) -> dict:
    if not row["index"].strip():
        raise DataError("a question without index", source, line)
    correct = fraction(row["hit"], "hit", source, line) if "hit" in row else float(_names_answer(row))
    kept = {c: row[c] for c in KEPT_COLUMNS if c in row}
    env = kept.get("category") or kept.get("split") or dataset
    return {"model": model, "bench": dataset, "id": row["index"].strip(), "correct": correct, "env": env,
            "line": line, **kept}


def _names_answer(row: dict) -> bool:
    """Whether the prediction names the answer's option (module doc)."""
    answer, prediction = row["answer"].strip().upper(), row["prediction"].strip()
    match = _LETTER.match(prediction.upper())
    if match:
        return match.group(1) == answer
    option = row.get(answer, "").strip()
    return bool(option) and prediction.lower().rstrip(".") == option.lower()


def _acc_rows(file: Path) -> list[dict]:
    source = str(file)
    model, dataset = model_and_dataset(file, file.stem.removesuffix("_acc"))
    rows = _table_rows(file)
    if not rows or "Overall" not in rows[0]:
        raise DataError("not a VLMEvalKit _acc.csv: no Overall column", source, 1)
    out = []
    for line, row in enumerate(rows, start=2):
        split = (row.get("split") or "none").strip()
        bench = dataset if split == "none" else f"{dataset} ({split})"
        out.append(accuracy_row(model, model, bench, fraction(row["Overall"], "Overall", source, line), None, line,
                                dataset=dataset))
    return out
