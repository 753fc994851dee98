"""Records a results reader leaves out on purpose, listed, never dropped in silence.

Any reader (of any format) appends a `Skip` (the file, the record in it, why) to its table's
`skipped`; the command that read the table calls `report_skips`, which prints one line per skip
and a count on stderr, or, under `--strict`, refuses the file with the first skip's line. The
commands write `skips_json` into their output JSON (fit.json, compare.json, subsets.json).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TextIO

from robustvlm.errors import DataError


@dataclass(frozen=True)
class Skip:
    """One record left out: `file` (its path), `record` (a line number, a task, a column: where in
    the file) and `why` (one sentence)."""

    file: str
    record: str
    why: str

    def line(self) -> str:
        """`FILE [RECORD]: WHY`, as the error lines name a record."""
        return f"{self.file} [{self.record}]: {self.why}"


def report_skips(skips: Sequence[Skip], *, strict: bool = False, stream: TextIO | None = None) -> None:
    """Print every skip and their count on `stream` (stderr); with `strict`, a DataError naming the
    first instead (and how many there are)."""
    if not skips:
        return
    if strict:
        first = skips[0]
        more = f" (and {len(skips) - 1} more left out)" if len(skips) > 1 else ""
        raise DataError(f"{first.why}{more}; --strict refuses a file with records left out", first.file,
                        first.record)
    out = stream if stream is not None else sys.stderr
    for skip in skips:
        print(f"skipped: {skip.line()}", file=out)
    files = len({s.file for s in skips})
    print(f"skipped {len(skips)} record(s) in {files} file(s); --strict turns a skip into an error", file=out)


def skips_json(skips: Sequence[Skip]) -> dict:
    """{"count", "by_file": {file: count}, "records": [{"file", "record", "why"}]} for an output JSON."""
    return {"count": len(skips), "by_file": dict(Counter(s.file for s in skips)),
            "records": [asdict(s) for s in skips]}
