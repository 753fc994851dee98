"""The shortcut-failure weights step by step, on the pairs where the text cue fails and where it agrees.

Reads the per-pair rows a shortcut-aware run writes (`reward.task`: sfc_pairs.jsonl: step, id,
SFC weight, the main branch's and the proxy's reward gap r_chosen - r_rejected) and each pair's
cue (the `cue` field of `preferences` records: where the environment's phrase went). A cue
*agrees* with the preference where a model following it ranks the pair right (`long`: the filler
on the chosen response; `short` and `clause`: on the rejected one), *fails* where it ranks the
pair wrong (the other side), and is absent otherwise (`plain`, or no phrase placed).

The paper's mechanism needs the failing pairs weighted up; docs/results/reward.md states when
SFC = L_t / (L + L_t) does that: while the main branch is right on those pairs and less sure than
the proxy elsewhere. Each step's summary says both: mean SFC per side, and the main branch's share
of right rankings and mean Bradley-Terry probability sigmoid(gap) of the chosen response per side.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robustvlm.errors import DataError

AGREES = {"long": "on_chosen", "short": "on_rejected", "clause": "on_rejected"}
FAILS = {"long": "on_rejected", "short": "on_chosen", "clause": "on_chosen"}
SIDES = ("failing", "agreeing")
SFC_PAIRS = "sfc_pairs.jsonl"


def read_sfc_pairs(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of RUN_DIR/sfc_pairs.jsonl, the last of each (step, id), ordered by step."""
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for line in (run_dir / SFC_PAIRS).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows[(row["step"], row["id"])] = row
    return sorted(rows.values(), key=lambda r: r["step"])


def cue_side(env: str, cue: str) -> str | None:
    """"failing", "agreeing" or None (no cue) for a pair of `env` whose phrase went `cue`."""
    if AGREES.get(env) == cue:
        return "agreeing"
    if FAILS.get(env) == cue:
        return "failing"
    return None


@dataclass(frozen=True)
class SideStep:
    """One side's pairs at one step (None where the step has none): how many, their mean SFC, the
    main branch's share of right rankings and mean sigmoid(gap), the proxy's share right."""

    n: int
    sfc: float | None
    main_right: float | None
    main_prob: float | None
    proxy_right: float | None

    @classmethod
    def of(cls, rows: Sequence[Mapping]) -> SideStep:
        if not rows:
            return cls(0, None, None, None, None)
        sfc = np.array([r["sfc"] for r in rows], float)
        main = np.array([r["main"] for r in rows], float)
        proxy = np.array([r["proxy"] for r in rows], float)
        return cls(len(rows), float(sfc.mean()), float(np.mean(main > 0)),
                   float(np.mean(1.0 / (1.0 + np.exp(-main)))), float(np.mean(proxy > 0)))


def sfc_steps(rows: Iterable[Mapping], sides: Mapping[str, str | None], *, window: int = 1) -> list[dict]:
    """Per window of `window` steps (steps 1..window, ...): {"step": its last step, "failing":
    SideStep fields, "agreeing": SideStep fields}, pooling every row given (e.g. every run's);
    `sides`: pair id -> `cue_side`. A row whose id `sides` lacks is an error (its data is not the
    run's)."""
    if window < 1:
        raise DataError(f"window must be at least 1 step, not {window}")
    bins: dict[int, dict[str, list[Mapping]]] = {}
    for row in rows:
        if row["id"] not in sides:
            raise DataError(f"sfc_pairs row of step {row['step']}: pair {row['id']!r} is not in the data")
        side = sides[row["id"]]
        if side is not None:
            last = -(-int(row["step"]) // window) * window
            bins.setdefault(last, {s: [] for s in SIDES})[side].append(row)
    return [{"step": step, **{s: SideStep.of(bins[step][s]).__dict__ for s in SIDES}} for step in sorted(bins)]


def pool_steps(steps: Sequence[Mapping], window: int) -> list[dict]:
    """`sfc_steps` rows pooled into windows of `window` steps (each side's means weighted by its
    pair counts), as `sfc_steps(..., window=window)` of the same pair rows gives."""
    if window < 1:
        raise DataError(f"window must be at least 1 step, not {window}")
    bins: dict[int, list[Mapping]] = {}
    for row in steps:
        bins.setdefault(-(-int(row["step"]) // window) * window, []).append(row)
    pooled = []
    for last in sorted(bins):
        entry: dict = {"step": last}
        for side in SIDES:
            parts = [row[side] for row in bins[last] if row[side]["n"]]
            n = sum(p["n"] for p in parts)
            entry[side] = {"n": n, **{key: (sum(p["n"] * p[key] for p in parts) / n if n else None)
                                      for key in ("sfc", "main_right", "main_prob", "proxy_right")}}
        pooled.append(entry)
    return pooled


def matrix_sfc_steps(matrix_dir: Path, data: Path, seeds: Sequence[int], envs: Sequence[str],
                     label: str = "shortcut_aware") -> dict[str, list[dict]]:
    """`sfc_steps` of the runs of `label` in an `rm matrix` output folder (runs/LABEL/seed-S/ENV/train),
    pooled ("all") and per seed ("seed-S"); `data`: the folder whose data.jsonl the runs trained on."""
    path = data / "data.jsonl"
    if not path.is_file():
        raise DataError(f"{path} not found: the data the runs of {matrix_dir} trained on")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    sides = {r["id"]: cue_side(r["env"], r.get("cue", "")) for r in records}
    per_seed = {seed: [row for env in envs for row in read_sfc_pairs(
        matrix_dir / "runs" / label / f"seed-{seed}" / env / "train")] for seed in seeds}
    steps = {"all": sfc_steps([r for rows in per_seed.values() for r in rows], sides)}
    steps.update({f"seed-{seed}": sfc_steps(rows, sides) for seed, rows in per_seed.items()})
    return steps
