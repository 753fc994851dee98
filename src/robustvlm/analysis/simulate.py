"""The Gaussian location model behind "accuracy on the line" (derivation: docs/robustness_theory.md).

Distribution P(theta, rho): y = +-1 uniformly, x = y * theta + (||theta|| / rho) * z,
z ~ N(0, I_d); rho is the signal-to-noise ratio of the margin. A linear head w predicts
sign(<x, w>) and has accuracy Phi(rho * cos(theta, w)) on P(theta, rho).

Heads are trained on P(theta_train, snr_train) with the mean estimator
w = mean_i(y_i x_i) plus Gaussian "algorithm noise", so that
w = theta_train + xi * ||theta_train|| / (snr_train * sqrt(n)) * g, g ~ N(0, I_d)
(xi = 1: the plain estimator; larger xi: a noisier training algorithm). Varying n and xi moves
a head along the line probit(acc_shift) = S * probit(acc_ref) with the predicted slope
S = (snr_shift * cos_shift) / (snr_ref * cos_ref), where cos_* = cos(theta_*, theta_train).

Unit-norm directions: theta_train = e1, theta_ref in span(e1, e2), theta_shift in
span(e1, e3), so cos(theta_ref, theta_shift) = cos_ref * cos_shift.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from robustvlm.analysis.accuracy_on_the_line import fit_line
from robustvlm.errors import ConfigError

DEFAULT_SIZE_RATIOS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)  # n / d of the trained heads
SEPARATION = 4.0
"""Binomial standard errors the heads' predicted reference accuracies must span on the test set."""
_CHUNK = 2**22  # floats drawn at a time while averaging training samples
#: A test distribution: (unit direction theta [d], SNR rho, cosine to the training direction).
_TestDistribution = tuple[np.ndarray, float, float]


def predicted_slope(*, cos_ref: float, snr_ref: float, cos_shift: float, snr_shift: float) -> float:
    """Slope of the probit line: (snr_shift * cos_shift) / (snr_ref * cos_ref)."""
    return (snr_shift * cos_shift) / (snr_ref * cos_ref)


def limit_accuracy(*, cos: float, snr: float, snr_train: float, xi: float, ratio: float) -> float:
    """High-dimensional limit of the accuracy: Phi(snr * cos / sqrt(1 + xi^2 / (snr_train^2 * ratio))).

    ratio = n / d, the number of training samples per dimension.
    """
    return float(sps.norm.cdf(snr * cos / np.sqrt(1 + xi**2 / (snr_train**2 * ratio))))


def _direction(dim: int, cos: float, axis: int) -> np.ndarray:
    """Unit vector at angle arccos(cos) from e1, tilted towards e_axis."""
    v = np.zeros(dim)
    v[0], v[axis] = cos, np.sqrt(1 - cos**2)
    return v


def _mean_estimator(theta: np.ndarray, snr: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """mean_i(y_i x_i) over n fresh samples of P(theta, snr), drawn in chunks; shape (d,)."""
    total = np.zeros_like(theta)
    rows = max(1, _CHUNK // theta.size)
    for start in range(0, n, rows):
        m = min(rows, n - start)
        x, y = _sample(theta, snr, m, rng)
        total += y @ x
    return total / n


def _sample(
    theta: np.ndarray, snr: float, m: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """m samples of P(theta, snr): x of shape (m, d), labels y of shape (m,) in {-1, +1} (float32)."""
    y = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=m)
    noise = rng.standard_normal((m, theta.size), dtype=np.float32)
    scale = np.float32(np.linalg.norm(theta) / snr)
    x = y[:, None] * theta.astype(np.float32)[None, :] + scale * noise
    return x, y


def min_test_examples(
    *, dim: int, sizes: Sequence[int], xis: Sequence[float], snr_train: float, snr_ref: float,
    cos_ref: float,
) -> float:
    """Test examples needed to tell the heads apart on the reference distribution.

    The heads' predicted (high-dimensional limit) reference accuracies p_j must span at least
    SEPARATION binomial standard errors sqrt(p (1 - p) / n_test), p their midpoint; otherwise
    the measured accuracies may coincide and no line can be fitted through them.

    Returns:
        The smallest such n_test (infinity when every head has the same predicted accuracy).
    """
    acc = [
        limit_accuracy(cos=cos_ref, snr=snr_ref, snr_train=snr_train, xi=xi, ratio=n / dim)
        for n in sizes
        for xi in xis
    ]
    spread, mid = max(acc) - min(acc), (max(acc) + min(acc)) / 2
    if spread <= 0:
        return float("inf")
    return float(np.ceil(SEPARATION**2 * mid * (1 - mid) / spread**2))


def _check(dim: int, sizes: Sequence[int], xis: Sequence[float], snrs: Sequence[float], cosines: Sequence[float],
           n_test: int) -> None:
    if dim < 3:
        raise ConfigError(f"dim must be at least 3 (three test directions), got {dim}")
    if len(sizes) * len(xis) < 2 or min(sizes) < 1:
        raise ConfigError(f"need positive sample sizes and at least two heads, got {sizes} x {xis}")
    if min(xis) < 1:
        raise ConfigError(f"algorithm noise xi must be >= 1 (1 = the plain estimator), got {xis}")
    if min(snrs) <= 0:
        raise ConfigError(f"signal-to-noise ratios must be positive, got {snrs}")
    if not all(0 < c <= 1 for c in cosines):
        raise ConfigError(f"cosines to the training direction must lie in (0, 1], got {cosines}")
    if n_test < 1:
        raise ConfigError(f"n_test must be positive, got {n_test}")
    snr_train, snr_ref, _ = snrs
    needed = min_test_examples(
        dim=dim, sizes=sizes, xis=xis, snr_train=snr_train, snr_ref=snr_ref, cos_ref=cosines[0]
    )
    if n_test < needed:
        raise ConfigError(
            f"n_test={n_test} is too small to fit a line: the heads' predicted reference "
            f"accuracies are too close to tell apart on so few test examples (dim={dim}, "
            f"sample_sizes={list(sizes)}, xis={list(xis)}); use n_test >= {needed:g}"
            if np.isfinite(needed)
            else "every head has the same predicted reference accuracy: they all sit at one "
            "point, and no line can be fitted through one point; vary sample_sizes or xis"
        )


def simulate(
    *,
    dim: int = 1000,
    sample_sizes: Sequence[int] | None = None,
    xis: Sequence[float] = (1.0, 2.0, 4.0),
    snr_train: float = 2.0,
    cos_ref: float = 1.0,
    snr_ref: float = 2.0,
    cos_shift: float = 0.7,
    snr_shift: float = 1.5,
    n_test: int = 5000,
    seed: int = 0,
) -> dict:
    """Train heads on the Gaussian model, score them on a reference and a shifted distribution.

    Args:
        dim: feature dimension d.
        sample_sizes: training-set sizes n; default d * (1/8, 1/4, ..., 4, 8).
        xis: algorithm-noise levels (>= 1); every (n, xi) pair gives one head.
        snr_train: SNR of the training distribution (its direction is e1).
        cos_ref, snr_ref: cosine to the training direction and SNR of the reference
            distribution (defaults: the training distribution itself).
        cos_shift, snr_shift: the same for the shifted distribution.
        n_test: test examples drawn per distribution (shared by all heads).
        seed: seed of all sampling.

    Returns:
        {"params": the arguments,
         "predicted": {"slope", "intercept"} of the theoretical probit line,
         "fit_exact": LineFit dict on the exact accuracies Phi(rho * cos(theta, w)),
         "fit_test": LineFit dict on accuracies measured on the n_test examples,
         "models": per head {"n_train", "xi", "acc_ref", "acc_shift" (exact),
                             "acc_ref_test", "acc_shift_test" (measured),
                             "acc_ref_limit", "acc_shift_limit" (high-dimensional limit)}}.
        Accuracies are fractions in [0, 1].
    """
    sizes = ([int(n) for n in sample_sizes] if sample_sizes is not None
             else [max(1, round(r * dim)) for r in DEFAULT_SIZE_RATIOS])
    _check(dim, sizes, list(xis), [snr_train, snr_ref, snr_shift], [cos_ref, cos_shift], n_test)
    params = {"dim": dim, "sample_sizes": sizes, "xis": [float(x) for x in xis], "snr_train": snr_train,
              "cos_ref": cos_ref, "snr_ref": snr_ref, "cos_shift": cos_shift, "snr_shift": snr_shift,
              "n_test": n_test, "seed": seed}
    rng = np.random.default_rng(seed)
    tests: dict[str, _TestDistribution] = {
        "ref": (_direction(dim, cos_ref, 1), snr_ref, cos_ref),
        "shift": (_direction(dim, cos_shift, 2), snr_shift, cos_shift),
    }
    test_sets = {name: _sample(theta, snr, n_test, rng) for name, (theta, snr, _) in tests.items()}
    w, rows = _train_heads(dim, sizes, xis, snr_train, rng)
    _score_heads(w, rows, tests, test_sets, snr_train)
    slope = predicted_slope(cos_ref=cos_ref, snr_ref=snr_ref, cos_shift=cos_shift, snr_shift=snr_shift)
    return {
        "params": params,
        "predicted": {"slope": slope, "intercept": 0.0},
        "fit_exact": _fit(rows, ""),
        "fit_test": _fit(rows, "_test"),
        "models": rows,
    }


def _train_heads(
    dim: int, sizes: Sequence[int], xis: Sequence[float], snr_train: float, rng: np.random.Generator
) -> tuple[np.ndarray, list[dict]]:
    """(heads w [d, n_heads], one row {"n_train", "xi"} per head), one head per (n, xi), each
    an independent training run on fresh samples of P(e1, snr_train)."""
    theta_train = _direction(dim, 1.0, 1)
    heads, rows = [], []
    for n in sizes:
        for xi in xis:  # every head is an independent training run on fresh samples
            extra = np.sqrt(xi**2 - 1) / (snr_train * np.sqrt(n))
            mean = _mean_estimator(theta_train, snr_train, n, rng)
            heads.append(mean + extra * rng.standard_normal(dim))
            rows.append({"n_train": n, "xi": float(xi)})
    return np.stack(heads, axis=1), rows


def _score_heads(
    w: np.ndarray,
    rows: list[dict],
    tests: dict[str, _TestDistribution],
    test_sets: dict[str, tuple[np.ndarray, np.ndarray]],
    snr_train: float,
) -> None:
    """Add to each head's row its exact, measured (on `test_sets`) and limit accuracy on every
    test distribution NAME: acc_NAME, acc_NAME_test, acc_NAME_limit."""
    dim = w.shape[0]
    w_unit = w / np.linalg.norm(w, axis=0, keepdims=True)
    for name, (theta, snr, cos) in tests.items():
        exact = sps.norm.cdf(snr * (theta @ w_unit))
        x, y = test_sets[name]
        measured = np.mean(np.sign(x @ w) == y[:, None], axis=0)
        for row, acc, acc_test in zip(rows, exact, measured):
            row[f"acc_{name}"] = float(acc)
            row[f"acc_{name}_test"] = float(acc_test)
            row[f"acc_{name}_limit"] = limit_accuracy(
                cos=cos, snr=snr, snr_train=snr_train, xi=row["xi"], ratio=row["n_train"] / dim
            )


def _fit(rows: list[dict], suffix: str) -> dict:
    """The probit LineFit dict of the heads' shifted against reference accuracies `acc_*{suffix}`."""
    ref = [r[f"acc_ref{suffix}"] for r in rows]
    shift = [r[f"acc_shift{suffix}"] for r in rows]
    return fit_line(ref, shift, transform="probit").to_dict()
