"""What a served model was sent during a run (requests, cache hits, tokens): the folder's usage.json."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

USAGE_FILE = "usage.json"


def usage_recorder(folder: str | Path) -> Callable[[Mapping[str, int]], None]:
    """A sink for a served model's live counts of this run (requests sent, cache hits, tokens):
    each call rewrites the folder's usage.json, atomically, as the sum of the earlier runs into
    the folder and these counts, so a killed or refused run leaves what it sent."""
    path = Path(folder) / USAGE_FILE
    earlier = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def record(counts: Mapping[str, int]) -> None:
        total = dict(earlier)
        for key, value in counts.items():
            total[key] = total.get(key, 0) + value
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(total, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(path)

    return record
