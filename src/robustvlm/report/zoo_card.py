"""Tables of a zoo member's card (its zoo_member.json, `workflows.zoo.build`): the held-out and
defined-label accuracies with Wilson 95% intervals, and the in-context curriculum's stages and
curves (`workflows.zoo.recall.ContextCurve`: per window of steps the labelled loss in nats, the
accuracy of the most likely token and the reference level; copying has emerged at the first
window whose loss is below half its level)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from robustvlm.errors import DataError
from robustvlm.report.icl_gain import wilson
from robustvlm.report.page import Table

HELDOUT_CHANCE = 0.1  # the 10-way Fashion-MNIST question


def _proportion(accuracy: float, n: int) -> str:
    """"acc [lo, hi]" with the Wilson 95% interval of round(accuracy * n) right of n."""
    lo, hi = wilson(round(accuracy * n), n)
    return f"{accuracy:.3f} [{lo:.3f}, {hi:.3f}]"


def zoo_card_table(info: Mapping[str, Any]) -> Table:
    """The card's accuracies: held-out 10-way, then each defined-label check with and without
    demonstrations (one per class), each with n, a Wilson 95% interval and chance."""
    n, trials = int(info["eval_images"]), int(info.get("defined_label_trials") or 0)
    rows = [["10-way question, held-out test pictures", str(n), _proportion(info["heldout_accuracy"], n),
             f"{HELDOUT_CHANCE:.3f}"]]
    for key, accuracy in sorted((info.get("defined_label_accuracy") or {}).items()):
        ways = int(key.split("-")[0])
        demos = "no demonstration" if key.endswith("0-shot") else "one demonstration per class"
        rows.append([f"defined labels, {ways} ways, {demos}", str(trials), _proportion(accuracy, trials),
                     f"{1 / ways:.3f}"])
    return Table(["measure", "n", "accuracy [95% CI]", "chance"], rows)


def _curved(info: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    stages = [s for s in info["stages"] if s.get("curve")]
    if not stages:
        raise DataError(f"zoo member {info.get('name')!r} logged no curriculum curve (its recipe has no "
                        "recall or episode steps)")
    return stages


def curriculum_stages_table(info: Mapping[str, Any]) -> Table:
    """One row per stage: steps, CPU seconds, final batch loss; for a curriculum stage its
    emergence step (or "not within the steps") and its last window's loss, accuracy and level."""
    _curved(info)
    rows = []
    for s in info["stages"]:
        curve = s.get("curve") or []
        last = curve[-1] if curve else None
        emerged = ("—" if not curve else
                   "not within the steps" if s.get("emergence_step") is None else f"{s['emergence_step']:,}")
        rows.append([s["stage"], f"{s['steps']:,}", f"{s['cpu_seconds']}", f"{s['final_loss']:.3f}", emerged,
                     *((f"{last['loss']:.3f}", f"{last['accuracy']:.3f}", f"{last['level']:.3f}") if last
                       else ("—", "—", "—"))])
    return Table(["stage", "steps", "CPU s", "final batch loss", "emergence step", "last window loss",
                  "last window accuracy", "level"], rows)


def thinned(curve: Sequence[Mapping[str, Any]], emergence: int | None, rows: int) -> list[Mapping[str, Any]]:
    """About `rows` windows of `curve` at an even stride, always with the first, the last and the
    emergence window, in step order."""
    stride = max(1, math.ceil(len(curve) / rows))
    keep = {0, len(curve) - 1, *range(stride - 1, len(curve), stride)}
    keep |= {i for i, w in enumerate(curve) if w["step"] == emergence}
    return [curve[i] for i in sorted(keep)]


def curriculum_curve_table(info: Mapping[str, Any], rows_per_stage: int = 16) -> Table:
    """The curriculum stages' curves, thinned (`thinned`): stage, step, labelled loss (nats),
    accuracy, level and loss / level (below 0.5: emerged)."""
    body = []
    for s in _curved(info):
        for w in thinned(s["curve"], s.get("emergence_step"), rows_per_stage):
            body.append([s["stage"], f"{w['step']:,}", f"{w['loss']:.3f}", f"{w['accuracy']:.3f}",
                         f"{w['level']:.3f}", f"{w['loss'] / w['level']:.2f}" if w["level"] else "—"])
    return Table(["stage", "step", "loss", "accuracy", "level", "loss / level"], body)
