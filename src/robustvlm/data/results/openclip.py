"""open_clip's results table (`docs/openclip_results.csv` in mlfoundations/open_clip): one row
per pretrained model, the columns `name`, `pretrained`, `params (M)`, `FLOPs (B)`, an
`Average perf. on N datasets`, then one column per dataset holding the zero-shot score as a
fraction. An empty cell is a dataset the model was not evaluated on (no row is made).

A model is `NAME PRETRAINED` (e.g. `ViT-B-32 laion2b_s34b_b79k`); its family is its pretraining
data source, read from the `pretrained` tag by `pretraining_source`; each row also carries the
columns `name`, `pretrained`, `source`, `params (M)` and `FLOPs (B)` for `--group-by`. The table
gives no question counts (see `data.results.sizes`).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from robustvlm.data.results.table import ResultTable, accuracy_row, fraction
from robustvlm.errors import DataError

#: (substring of the lower-cased `pretrained` tag, data source), tried in this order; a tag that
#: matches none is "other". The first match wins, so `commonpool_xl_laion_...` is CommonPool
#: (a filtered CommonPool pool) and `mscoco_finetuned_laion2b_...` LAION-2B/5B.
SOURCE_RULES: tuple[tuple[str, str], ...] = (
    ("openai", "OpenAI WIT"),
    ("webli", "WebLI"),
    ("dfn", "DFN"),
    ("datacomp", "DataComp"),
    ("commonpool", "CommonPool"),
    ("metaclip", "MetaCLIP"),
    ("merged2b", "Merged-2B"),
    ("laion400m", "LAION-400M"),
    ("laion", "LAION-2B/5B"),
    ("yfcc15m", "YFCC-15M"),
    ("cc12m", "CC-12M"),
)
#: columns that are not datasets
META_COLUMNS = ("name", "pretrained", "params (M)", "FLOPs (B)")
_AVERAGE = re.compile(r"^average\b", re.I)


def pretraining_source(tag: str) -> str:
    """The pretraining data source a `pretrained` tag names (`SOURCE_RULES`), e.g.
    "laion2b_s34b_b79k" -> "LAION-2B/5B", "dfn5b" -> "DFN", "v1" -> "other"."""
    lowered = tag.lower()
    return next((source for key, source in SOURCE_RULES if key in lowered), "other")


def _dataset_columns(header: list[str]) -> list[str]:
    return [c for c in header if c not in META_COLUMNS and not _AVERAGE.match(c)]


def looks_like(path: Path) -> bool:
    """A .csv whose header has `name` and `pretrained` and no `bench` or `dataset` column."""
    header = _header(path)
    return header is not None and {"name", "pretrained"} <= set(header) and not {"bench", "dataset"} & set(header)


def _header(path: Path) -> list[str] | None:
    if path.is_dir() or path.suffix.lower() != ".csv":
        return None
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            return next(csv.reader(f), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def read(path: Path) -> ResultTable:
    """Every (model, dataset) score of the table as an accuracy row (n None)."""
    source = str(path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            missing = [c for c in ("name", "pretrained") if c not in header]
            if missing:
                raise DataError(f"not an open_clip results table: no column(s) {', '.join(missing)}", source, 1)
            rows = [row for raw in reader for row in _model_rows(raw, _dataset_columns(header), source, reader.line_num)]
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DataError(f"cannot read the open_clip table: {err}", source) from err
    if not rows:
        raise DataError("the open_clip table has no scores", source)
    return ResultTable(accuracies=rows)


def _model_rows(raw: dict, datasets: list[str], source: str, line: int) -> list[dict]:
    name, tag = (raw.get("name") or "").strip(), (raw.get("pretrained") or "").strip()
    if not name or not tag:
        raise DataError("empty name or pretrained", source, line)
    family = pretraining_source(tag)
    extra = {"name": name, "pretrained": tag, "source": family,
             "params (M)": (raw.get("params (M)") or "").strip(), "FLOPs (B)": (raw.get("FLOPs (B)") or "").strip()}
    return [accuracy_row(f"{name} {tag}", family, dataset, fraction(value, f"column {dataset!r}", source, line),
                         None, line, **extra)
            for dataset in datasets if (value := (raw.get(dataset) or "").strip())]
