"""A built-in image-folder suite on disk, and its seeded per-class held-out split: the data
helpers the robustness demos and the task-signal experiment share.

A suite is ROOT/DOMAIN/CLASS/NNNN.png (`data.synth`); image NNNN of a class is the same scan in
every domain, so holding out the same indices in every domain keeps every held-out scan unseen
in training in any style.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robustvlm.data.synth import synthesize

#: The data seed of the demos' and experiments' suites and splits.
DATA_SEED = 0


def synthesize_suite(out: Path, suite: str, per_class: int, *, reference: str = "clean",
                     seed: int = DATA_SEED) -> Path:
    """Image-folder suite `suite` in `out` (reused when its manifest says it was made with this
    seed and `per_class` images per class of domain `reference`); returns `out`."""
    manifest = out / "manifest.json"
    if manifest.is_file():
        info = json.loads(manifest.read_text(encoding="utf-8"))
        counts = info.get("counts", {}).get(reference, {})
        if info.get("benchmark") == suite and info.get("seed") == seed and set(counts.values()) == {per_class}:
            return out
    synthesize(suite, out, seed=seed, n_per_env=per_class)
    return out


def held_out_indices(per_class: int, test_fraction: float, classes: list[str], *,
                     seed: int = DATA_SEED) -> dict[str, set[int]]:
    """Per class, the image indices held out of training: a seeded `test_fraction` (at least
    one) of 0 .. per_class - 1, the same in every domain."""
    n_test = max(1, round(per_class * test_fraction))
    return {
        cls: set(np.random.default_rng([seed, i]).permutation(per_class)[:n_test].tolist())
        for i, cls in enumerate(sorted(classes))
    }
