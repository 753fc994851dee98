"""Compare two JSON or JSONL files' records as written by runs on different CPUs: every key, string,
integer and yes/no exactly, every float to a relative 1e-6 (float32 rounding: the same model, data
and seeds on another CPU's kernels, or on one thread instead of two, differ in the 7th digit, e.g.
-6.230189800262451 against -6.230190277099609 on an Intel Xeon and an AMD EPYC)."""

from __future__ import annotations

import json
import math
from typing import Any

REL = 1e-6


def same_values(a: Any, b: Any, rel: float = REL) -> bool:
    """Whether `a` and `b` (parsed JSON) are equal but for float rounding within `rel`."""
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        return math.isclose(a, b, rel_tol=rel, abs_tol=rel)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same_values(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_values(x, y, rel) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def same_records(text_a: str, text_b: str, rel: float = REL) -> bool:
    """Whether two JSON documents, or two JSONL files (one JSON value per line), hold the same
    records but for float rounding within `rel`."""
    try:
        return same_values(json.loads(text_a), json.loads(text_b), rel)
    except json.JSONDecodeError:
        lines_a, lines_b = text_a.splitlines(), text_b.splitlines()
        return len(lines_a) == len(lines_b) and all(
            same_values(json.loads(x), json.loads(y), rel) for x, y in zip(lines_a, lines_b, strict=True))
