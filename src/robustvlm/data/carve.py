"""Carve fixed-size train / test sets out of each environment (the paper's 400 train / 200 test).

Datasets such as LLaVA-OneVision ship one `train` split; a study needs, per environment, a
training set and a disjoint test set of fixed sizes. `carve_per_env` draws them with a seeded
permutation per environment. The unit drawn is a *record*: all turns of one conversation
(ids `ID#0`, `ID#1`, ...) go to the same side, so no image is both trained on and tested.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

import numpy as np

from robustvlm.data.records import EnvRecord, Example

Record = TypeVar("Record", bound=EnvRecord)


def record_key(example_id: str) -> str:
    """The record an example comes from: its id without a trailing `#<turn>`."""
    head, sep, tail = example_id.rpartition("#")
    return head if sep and tail.isdigit() else example_id


def carve_per_env(
    examples: Sequence[Record], *, train: int | None, test: int, seed: int
) -> tuple[list[Record], dict[str, dict[str, int]]]:
    """Per environment, `test` records for testing and the next `train` for training.

    Args:
        examples: records of every split (their own split labels are ignored).
        train: training records per in-domain environment (None = all that remain).
        test: test records per environment; out-of-domain environments get only these.
        seed: the draw's seed; each environment's permutation also depends on its name.

    Returns:
        (the kept examples in input order with split set to "train" or "test",
         {env: {"records", "wanted", "train", "test"}} counting records).
    """
    by_env: dict[str, dict[str, None]] = {}
    for ex in examples:
        by_env.setdefault(ex.env, {})[record_key(ex.id)] = None
    ood_envs = {ex.env for ex in examples if ex.ood}
    side: dict[tuple[str, str], str] = {}
    counts: dict[str, dict[str, int]] = {}
    for env, records in by_env.items():
        keys = list(records)
        order = np.random.default_rng([seed, zlib.crc32(env.encode("utf-8"))]).permutation(
            len(keys)
        )
        drawn = [keys[i] for i in order]
        ood = env in ood_envs
        test_keys = drawn[:test]
        train_keys = [] if ood else drawn[test:] if train is None else drawn[test : test + train]
        side.update({(env, k): "test" for k in test_keys})
        side.update({(env, k): "train" for k in train_keys})
        wanted = test + (0 if ood or train is None else train)
        counts[env] = {
            "records": len(keys),
            "wanted": wanted,
            "train": len(train_keys),
            "test": len(test_keys),
        }
    kept = [
        replace(ex, split=side[(ex.env, record_key(ex.id))])
        for ex in examples
        if (ex.env, record_key(ex.id)) in side
    ]
    return kept, dict(sorted(counts.items()))


def short_environments(counts: dict[str, dict[str, int]]) -> list[str]:
    """Plain-words lines for the environments of `carve_per_env` holding fewer records than asked."""
    return [
        f"environment {env!r} has {c['records']} records, fewer than the {c['wanted']} asked for: "
        f"{c['train']} train / {c['test']} test"
        for env, c in counts.items()
        if c["records"] < c["wanted"]
    ]


def hold_out(examples: Sequence[Example], fraction: float, *, seed: int) -> list[Example]:
    """DomainBed's held-out ("out") split of every environment, as split "val".

    - an in-domain environment that has `val` records keeps them (a built-in benchmark's own
      validation split); one without draws `fraction` of its `train` records (at least one);
    - an out-of-domain environment moves `fraction` of its `test` records (at least one) to
      `val`: the part a test-domain (oracle) selection looks at; the rest stays `test`, the part
      that is reported.

    Records are drawn whole (all turns of a conversation together), by a seeded permutation per
    environment (`seed` and the environment's name). Returns the examples in input order.
    """
    by_env: dict[str, dict[str, set[str]]] = {}
    for ex in examples:
        by_env.setdefault(ex.env, {}).setdefault(ex.split, set()).add(record_key(ex.id))
    ood_envs = {ex.env for ex in examples if ex.ood}
    moved: dict[tuple[str, str], str] = {}
    for env, splits in by_env.items():
        source = "test" if env in ood_envs else "train"
        if env not in ood_envs and splits.get("val"):
            continue
        keys = sorted(splits.get(source, ()))
        if len(keys) < 2:
            continue
        rng = np.random.default_rng([seed, zlib.crc32(f"holdout:{env}".encode())])
        n = min(len(keys) - 1, max(1, round(fraction * len(keys))))
        moved.update({(env, keys[i]): source for i in rng.permutation(len(keys))[:n]})
    return [
        replace(ex, split="val") if moved.get((ex.env, record_key(ex.id))) == ex.split else ex
        for ex in examples
    ]
