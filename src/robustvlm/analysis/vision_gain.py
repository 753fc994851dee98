"""The vision gain: a model's score with the image minus its score blind (image removed, see
`models.blind`), per environment, with a paired interval. Pure functions.

Both runs score the same questions, so the gain is a paired difference: `analysis.paired`'s
`compare_paired` gives its mean (normal - blind, in score units: 0-1 for accuracy), its paired
(cluster) bootstrap 95% interval and, for 0/1 scores, the exact McNemar p-value. Questions that
share a cluster label (the rotations of one circular question) are resampled together.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from robustvlm.analysis.paired import compare_paired
from robustvlm.errors import DataError

ALL = "all"  # the environment label of the pooled row
GAIN_COLUMNS = ("env", "n", "normal", "blind", "gain", "ci_lo", "ci_hi", "only_normal", "only_blind", "mcnemar_p")


def _check_same_keys(normal: Mapping[Hashable, float], blind: Mapping[Hashable, float]) -> None:
    missing, extra = set(normal) - set(blind), set(blind) - set(normal)
    if missing or extra:
        first = sorted(map(str, missing or extra))[0]
        raise DataError(f"the normal and blind runs must score the same questions: {first!r} is only in the "
                        f"{'normal' if missing else 'blind'} run")


def gain_row(env: str, keys: list[Hashable], normal: Mapping[Hashable, float], blind: Mapping[Hashable, float],
             clusters: Mapping[Hashable, Hashable] | None, seed: int) -> dict[str, Any]:
    """The GAIN_COLUMNS row of the questions `keys`."""
    c = compare_paired([normal[k] for k in keys], [blind[k] for k in keys],
                       clusters=[clusters[k] for k in keys] if clusters is not None else None, seed=seed)
    return {"env": env, "n": c.n, "normal": c.mean_a, "blind": c.mean_b, "gain": c.difference,
            "ci_lo": c.ci_lo, "ci_hi": c.ci_hi, "only_normal": c.only_a, "only_blind": c.only_b,
            "mcnemar_p": c.mcnemar_p}


def vision_gain(
    normal: Mapping[Hashable, float], blind: Mapping[Hashable, float], envs: Mapping[Hashable, str], *,
    clusters: Mapping[Hashable, Hashable] | None = None, seed: int = 0,
) -> list[dict[str, Any]]:
    """One GAIN_COLUMNS row per environment (sorted), then the pooled row (env ALL).

    Args:
        normal, blind: question key -> score of the normal and the blind run (the same keys;
            a key in one only is a DataError).
        envs: question key -> its environment.
        clusters: question key -> cluster label (None: every question its own).
        seed: the bootstrap's seed.
    """
    _check_same_keys(normal, blind)
    if not normal:
        raise DataError("no scored questions to compare with the blind run")
    by_env: dict[str, list[Hashable]] = {}
    for key in normal:
        by_env.setdefault(str(envs[key]), []).append(key)
    rows = [gain_row(env, by_env[env], normal, blind, clusters, seed) for env in sorted(by_env)]
    return rows + [gain_row(ALL, list(normal), normal, blind, clusters, seed)]
