"""open_clip's results table (`docs/openclip_results.csv` in mlfoundations/open_clip): one row
per pretrained model, the columns `name`, `pretrained`, `params (M)`, `FLOPs (B)`, an
`Average perf. on N datasets`, then one column per dataset holding the zero-shot score as a
fraction. An empty cell is a dataset the model was not evaluated on (no row is made).

A model is `NAME PRETRAINED` (e.g. `ViT-B-32 laion2b_s34b_b79k`); its family is its pretraining
data source, read from the `pretrained` tag by `pretraining_source`; each row also carries the
columns `name`, `pretrained`, `source`, `params (M)` and `FLOPs (B)` for `--group-by`. The table
gives no question counts (see `data.results.sizes`).

Not every column is an accuracy. The table is DataComp's evaluation suite, whose `tasklist.yml`
(mlfoundations/datacomp) names each dataset's main metric; the columns in `NOT_ACCURACY` hold
another measure (mean per-class recall, retrieval recall, a Jaccard score, macro F1, a
worst-group accuracy), which is no share of a counted set of questions: a binomial interval or a
resampling of questions would be wrong for them. They are left out (one skip per column, listed)
unless the reader is asked for them (`--allow-non-accuracy`); then their rows carry `measure`
(what the number is) and no question count, and `fill_counts` gives them none. Every other column
is top-1 accuracy (`acc1`, DataComp's default main metric).
"""

from __future__ import annotations

import re
from pathlib import Path

from robustvlm.data.results.table import ReadOptions, ResultTable, accuracy_row, fraction
from robustvlm.data.results.text import csv_header, csv_records
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
#: columns whose score is not top-1 accuracy -> what it is (DataComp's tasklist.yml `main_metric`)
NOT_ACCURACY: dict[str, str] = {
    "Caltech-101": "mean per-class recall",
    "FGVC Aircraft": "mean per-class recall",
    "Oxford Flowers-102": "mean per-class recall",
    "Oxford-IIIT Pet": "mean per-class recall",
    "Flickr": "mean recall@1 (retrieval)",
    "MSCOCO": "mean recall@1 (retrieval)",
    "WinoGAViL": "Jaccard score (10-12 candidates)",
    "iWildCam": "macro F1",
    "FMoW": "worst-region accuracy",
    "Dollar Street": "worst-group top-5 accuracy",
    "GeoDE": "worst-group accuracy",
}
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
    header = set(csv_header(path) or [])
    return {"name", "pretrained"} <= header and not {"bench", "dataset"} & header


def read(path: Path, options: ReadOptions | None = None) -> ResultTable:
    """Every (model, dataset) score of the table as an accuracy row (n None); the columns of
    `NOT_ACCURACY` listed as skipped, or with `options.allow_non_accuracy` read with their `measure`."""
    source, allow = str(path), bool(options and options.allow_non_accuracy)
    header, records = csv_records(path, "open_clip results table")
    missing = [c for c in ("name", "pretrained") if c not in header]
    if missing:
        raise DataError(f"not an open_clip results table: no column(s) {', '.join(missing)}", source, 1)
    table = ResultTable()
    datasets = _dataset_columns(header)
    for column in datasets:
        if column in NOT_ACCURACY and not allow:
            table.skip(source, f"column {column}", f"{NOT_ACCURACY[column]}, not an accuracy over a counted set "
                       "(read it with --allow-non-accuracy)")
    wanted = [c for c in datasets if allow or c not in NOT_ACCURACY]
    table.accuracies = [row for line, raw in records for row in _model_rows(raw, wanted, source, line)]
    if not table.accuracies:
        raise DataError("the open_clip table has no scores", source)
    return table


def _model_rows(raw: dict, datasets: list[str], source: str, line: int) -> list[dict]:
    name, tag = (raw.get("name") or "").strip(), (raw.get("pretrained") or "").strip()
    if not name or not tag:
        raise DataError("empty name or pretrained", source, line)
    family = pretraining_source(tag)
    extra = {"name": name, "pretrained": tag, "source": family,
             "params (M)": (raw.get("params (M)") or "").strip(), "FLOPs (B)": (raw.get("FLOPs (B)") or "").strip()}
    return [accuracy_row(f"{name} {tag}", family, dataset, fraction(value, f"column {dataset!r}", source, line),
                         None, line, **extra, **({"measure": NOT_ACCURACY[dataset]} if dataset in NOT_ACCURACY else {}))
            for dataset in datasets if (value := (raw.get(dataset) or "").strip())]
