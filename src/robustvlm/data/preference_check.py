"""`robustvlm rm data check`: validate preference data and report train / test overlap.

Public reward benchmarks are built from the same sources as the training sets (COCO images,
LLaVA instructions), so a test pair may show an image or ask a query seen in training. The check
finds such pairs by image *content* (a hash of the decoded pixels and size, so a re-saved copy
under another name still matches) and by query (compared lower-cased, whitespace collapsed).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robustvlm.data.environments import format_env_counts
from robustvlm.data.images import load_image
from robustvlm.data.preferences import PairOptions, PairSet, PreferencePair, read_pairs
from robustvlm.errors import DataError

SHOWN = 5


def image_key(pair: PreferencePair) -> str:
    """SHA-256 of the decoded RGB pixels and the size of the pair's image."""
    image = load_image(pair.image, source=pair.source, record=pair.id)
    digest = hashlib.sha256(f"{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


def query_key(pair: PreferencePair) -> str:
    return " ".join(pair.query.lower().split())


@dataclass
class Overlap:
    """Test pairs sharing an image and / or a query with some training pair."""

    n_test: int
    same_image: list[str] = field(default_factory=list)
    same_query: list[str] = field(default_factory=list)
    both: list[str] = field(default_factory=list)

    def format(self) -> str:
        lines = [f"overlap of {self.n_test} test pair(s) with the training pairs:"]
        for what, ids in (("same image", self.same_image), ("same query", self.same_query),
                          ("same image and query", self.both)):
            shown = ", ".join(ids[:SHOWN]) + (", ..." if len(ids) > SHOWN else "")
            lines.append(f"  {what}: {len(ids)}" + (f" (e.g. {shown})" if ids else ""))
        return "\n".join(lines)


def find_overlap(train: list[PreferencePair], test: list[PreferencePair]) -> Overlap:
    """Which `test` pairs share an image (by content) or a query with a `train` pair."""
    images = {image_key(p) for p in train}
    queries = {query_key(p) for p in train}
    out = Overlap(len(test))
    for pair in test:
        image, query = image_key(pair) in images, query_key(pair) in queries
        for hit, ids in ((image, out.same_image), (query, out.same_query), (image and query, out.both)):
            if hit:
                ids.append(pair.id)
    return out


@dataclass
class PairCheckReport:
    """What `check_pairs` found: the good pairs, one DataError per bad record, the overlap."""

    pairs: PairSet
    errors: list[DataError]
    overlap: Overlap | None

    @property
    def ok(self) -> bool:
        return not self.errors

    def format(self) -> str:
        lines = [self.pairs.describe(), format_env_counts(self.pairs.pairs), "",
                 f"{len(self.pairs.pairs)} good pair(s), {len(self.errors)} bad record(s)"]
        lines += [f"  {error}" for error in self.errors]
        if self.overlap is not None:
            lines += ["", self.overlap.format()]
        return "\n".join(lines)


def check_pairs(path: str | Path, *, test_path: str | Path | None = None, **options: Any) -> PairCheckReport:
    """Read `path` (and `test_path`) like `read_pairs` with `PairOptions(**options)`, collecting every bad
    record; the overlap is between `test_path`'s pairs and `path`'s, or, without a test file,
    between `path`'s test and train splits (None when one of them is empty)."""
    errors: list[DataError] = []

    def read(source: str | Path) -> PairSet:
        try:
            return read_pairs(source, errors.append, PairOptions(**options))
        except DataError as error:
            errors.append(error)
            return PairSet()

    pairs = read(path)
    if test_path is not None:
        test = read(test_path)
        train_pairs, test_pairs = list(pairs.pairs), test.pairs
        pairs.extend(test)
    else:
        train_pairs = [p for p in pairs.pairs if p.split == "train"]
        test_pairs = [p for p in pairs.pairs if p.split == "test"]
    overlap = find_overlap(train_pairs, test_pairs) if train_pairs and test_pairs else None
    return PairCheckReport(pairs, errors, overlap)
