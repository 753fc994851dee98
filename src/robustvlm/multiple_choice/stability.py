"""How accuracy settles as a benchmark grows: accuracy of random question subsets by size.

Pure function on per-question correctness; shows from which size on a benchmark's accuracy
stops moving (its spread across subsets becomes small against the differences that matter).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robustvlm.errors import ConfigError, DataError

DEFAULT_SIZES = (500, 1000, 2000, 5000, 10000, 20000, 50000)


def accuracy_vs_size(
    correct: Sequence[bool],
    sizes: Sequence[int] | None = DEFAULT_SIZES,
    *,
    n_draws: int = 50,
    seed: int = 0,
    alpha: float = 0.05,
) -> list[dict[str, float]]:
    """Accuracy of `n_draws` random subsets (drawn without replacement) per subset size.

    Args:
        correct: shape (n,), one bool per question.
        sizes: subset sizes; those >= n are dropped and the full benchmark (size n, std 0) is
            always the last row. None = the full benchmark only.
        n_draws: subsets per size.
        seed: seed of the subset draws.
        alpha: the rows' lo / hi are the alpha/2 and 1 - alpha/2 quantiles of the draws.

    Returns:
        rows {"size", "mean", "std" (ddof=1 over draws), "lo", "hi"}, accuracies as fractions,
        sizes ascending.
    """
    values = np.asarray(correct, dtype=bool)
    if values.ndim != 1 or values.size == 0:
        raise DataError(f"correct must be a non-empty 1-D sequence of booleans, got shape {values.shape}")
    if n_draws < 2:
        raise ConfigError(f"n_draws must be >= 2 to estimate a spread, got {n_draws}")
    if any(int(s) != s or s < 1 for s in sizes or ()):
        raise ConfigError(f"sizes must be positive integers, got {list(sizes or ())}")
    n = values.size
    rng = np.random.default_rng(seed)
    rows = []
    for size in sorted({int(s) for s in sizes or () if s < n}):
        accs = np.array([values[rng.choice(n, size=size, replace=False)].mean() for _ in range(n_draws)])
        lo, hi = np.quantile(accs, [alpha / 2, 1 - alpha / 2])
        rows.append({"size": size, "mean": float(accs.mean()), "std": float(accs.std(ddof=1)),
                     "lo": float(lo), "hi": float(hi)})
    full = float(values.mean())
    rows.append({"size": n, "mean": full, "std": 0.0, "lo": full, "hi": full})
    return rows
