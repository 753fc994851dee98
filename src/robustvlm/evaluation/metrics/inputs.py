"""Input checks shared by the metrics: parallel columns of strings, one row per sample."""

from __future__ import annotations

from collections.abc import Sequence

from robustvlm.errors import DataError


def check_text_columns(metric: str, columns: dict[str, Sequence[str]]) -> None:
    """Raise DataError unless the named columns have equal lengths and hold only strings.

    Args:
        metric: the metric's name, used in the message (e.g. "chrF").
        columns: column name (plural, e.g. "predictions") -> values, in message order.
    """
    counts = [f"{len(values)} {name}" for name, values in columns.items()]
    if len({len(values) for values in columns.values()}) > 1:
        got = " and ".join(counts) if len(counts) == 2 else ", ".join(counts)
        raise DataError(f"{metric} needs one of each per sample: got {got}")
    for i, row in enumerate(zip(*columns.values())):
        if not all(isinstance(x, str) for x in row):
            kinds = ", ".join(f"{name} {type(x).__name__}" for name, x in zip(columns, row))
            raise DataError(
                f"{metric} takes strings, got ({kinds})", source=f"{metric} input", record=i
            )
