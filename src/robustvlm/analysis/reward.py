"""Reward-model statistics: pairwise accuracy, shortcut-failure degradation, length statistics,
generalization-matrix averages, and the Best-of-N estimator. Pure functions on numbers.

Accuracies are fractions in [0, 1]; rewards are the models' raw scalars.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from math import comb

import numpy as np

from robustvlm.analysis.stats import bootstrap_ci, mean_std
from robustvlm.errors import DataError


@dataclass(frozen=True)
class PairAccuracy:
    """accuracy = share of pairs with r_chosen > r_rejected (a tie counts as wrong), `ties` the
    share with r_chosen == r_rejected, reported apart; [ci_lo, ci_hi] a 95% percentile bootstrap
    interval of the accuracy over pairs."""

    accuracy: float
    ties: float
    n: int
    ci_lo: float
    ci_hi: float

    def to_dict(self) -> dict:
        return asdict(self)


def _rewards(r_chosen: Sequence[float], r_rejected: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(r_chosen, dtype=float), np.asarray(r_rejected, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise DataError(f"need equally many chosen and rejected rewards (got {a.shape} and {b.shape})")
    return a, b


def pairwise_accuracy(
    r_chosen: Sequence[float], r_rejected: Sequence[float], *, n_boot: int = 1000, seed: int = 0
) -> PairAccuracy:
    """Accuracy, ties and a bootstrap CI of one model on n pairs (arrays of shape (n,))."""
    a, b = _rewards(r_chosen, r_rejected)
    correct = (a > b).astype(float)
    lo, hi = bootstrap_ci(correct, n_boot=n_boot, seed=seed)
    return PairAccuracy(float(correct.mean()), float(np.mean(a == b)), int(a.size), lo, hi)


@dataclass(frozen=True)
class SFD:
    """Shortcut-failure degradation of a model on one test set: its accuracy on the pairs the
    text-only proxy gets right (shortcut success) minus on those it gets wrong (shortcut fail).
    `sfd` is None when either subset is empty."""

    sfd: float | None
    acc_success: float | None
    acc_fail: float | None
    n_success: int
    n_fail: int

    def to_dict(self) -> dict:
        return asdict(self)


def shortcut_failure_degradation(main_correct: Sequence[bool], proxy_correct: Sequence[bool]) -> SFD:
    """SFD from per-pair correctness of the model and of the text-only proxy (same pairs, same
    order; a proxy tie counts as a failure, as in accuracy)."""
    main, proxy = np.asarray(main_correct, dtype=bool), np.asarray(proxy_correct, dtype=bool)
    if main.shape != proxy.shape or main.ndim != 1:
        raise DataError(f"need one proxy verdict per pair (got {main.shape} and {proxy.shape})")
    success, fail = main[proxy], main[~proxy]
    acc_s = float(success.mean()) if success.size else None
    acc_f = float(fail.mean()) if fail.size else None
    sfd = acc_s - acc_f if acc_s is not None and acc_f is not None else None
    return SFD(sfd, acc_s, acc_f, int(success.size), int(fail.size))


def word_lengths(texts: Sequence[str]) -> np.ndarray:
    """Whitespace-separated word counts, shape (n,)."""
    return np.array([len(t.split()) for t in texts], dtype=int)


def length_shares(chosen: Sequence[str], rejected: Sequence[str]) -> dict[str, float]:
    """Shares of pairs whose chosen response is longer, shorter or as long (in words)."""
    c, r = word_lengths(chosen), word_lengths(rejected)
    if c.shape != r.shape or c.size == 0:
        raise DataError("need one chosen and one rejected response per pair")
    return {"chosen_longer": float(np.mean(c > r)), "chosen_shorter": float(np.mean(c < r)),
            "equal": float(np.mean(c == r))}


def length_balanced_subset(chosen: Sequence[str], rejected: Sequence[str], *, seed: int = 0) -> np.ndarray:
    """Indices (sorted) of a subset in which as many chosen responses are longer as shorter: every
    equal-length pair, and a seeded draw of the larger of the two groups down to the smaller."""
    c, r = word_lengths(chosen), word_lengths(rejected)
    longer, shorter, equal = np.flatnonzero(c > r), np.flatnonzero(c < r), np.flatnonzero(c == r)
    k = min(longer.size, shorter.size)
    rng = np.random.default_rng(seed)
    keep = [equal, rng.choice(longer, k, replace=False), rng.choice(shorter, k, replace=False)]
    return np.sort(np.concatenate(keep)).astype(int)


def sfc_distribution(
    sfc: Sequence[float] | np.ndarray, proxy_correct: Sequence[bool] | np.ndarray
) -> dict[str, float | None]:
    """Where the shortcut-failure weights of n training pairs fall: `sfc` [n] in (0, 1), and
    `proxy_correct` [n], whether the text-only proxy ranks each pair right.

    Returns fractions: `mean` SFC, `above_half` (share of pairs weighted above 0.5), `proxy_wrong`
    (share of pairs the proxy ranks wrong), `mean_proxy_wrong` / `mean_proxy_right` (mean SFC on
    each side; None where empty) and `weight_proxy_wrong`, the proxy-wrong pairs' share of the
    summed weight: equal to `proxy_wrong` when every weight is the same, higher when the weighting
    shifts training towards the pairs where the shortcut fails.
    """
    weights, right = np.asarray(sfc, dtype=float), np.asarray(proxy_correct, dtype=bool)
    if weights.ndim != 1 or weights.shape != right.shape or weights.size == 0:
        raise DataError(f"need one proxy verdict per SFC weight (got {weights.shape} and {right.shape})")
    return {
        "mean": float(weights.mean()),
        "above_half": float(np.mean(weights > 0.5)),
        "proxy_wrong": float(np.mean(~right)),
        "mean_proxy_wrong": float(weights[~right].mean()) if (~right).any() else None,
        "mean_proxy_right": float(weights[right].mean()) if right.any() else None,
        "weight_proxy_wrong": float(weights[~right].sum() / weights.sum()),
    }


def logged_sfc(logs: Sequence[Sequence[Mapping]], *, from_fraction: float = 0.5) -> dict:
    """Where the SFC weights fell in shortcut-aware training runs, from their logged step rows
    (`reward.task`: `acc_proxy`, `sfc`, `sfc_dist/<key>`), one list of rows per run: the mean over
    every run's rows after `from_fraction` of its last step (the weights that acted once the
    proxy had learned what it learns).

    Returns {"train_accuracy": the proxy's mean batch accuracy, "sfc": {key: mean} with the keys
    of `sfc_distribution` (None where no row holds the key)}.
    """
    kept = [row for rows in logs if rows for row in rows if row["step"] > from_fraction * rows[-1]["step"]]
    if not kept:
        raise DataError("no logged shortcut-aware steps to summarise")

    def mean(key: str) -> float | None:
        values = [row[key] for row in kept if key in row]
        return float(np.mean(values)) if values else None

    keys = ("above_half", "proxy_wrong", "mean_proxy_wrong", "mean_proxy_right", "weight_proxy_wrong")
    return {"train_accuracy": mean("acc_proxy"),
            "sfc": {"mean": mean("sfc"), **{k: mean(f"sfc_dist/{k}") for k in keys}}}


def matrix_averages(cells: Mapping[tuple[str, str], float]) -> dict[str, float | None]:
    """i.i.d. (train env == test env, the diagonal) and o.o.d. (the rest) means of a
    generalization matrix {(train env, test env): accuracy}; None where there is no such cell."""
    iid = [v for (train, test), v in cells.items() if train == test]
    ood = [v for (train, test), v in cells.items() if train != test]
    return {"iid": float(np.mean(iid)) if iid else None, "ood": float(np.mean(ood)) if ood else None}


def seed_spread(values: Sequence[float]) -> dict:
    """{mean, std (ddof 1; None for one seed), min, max, n, values} of one quantity over seeds
    (`values` in seed order, for paired comparisons)."""
    mean, std = mean_std(values)
    arr = np.asarray(values, dtype=float)
    return {"mean": mean, "std": std, "min": float(arr.min()), "max": float(arr.max()), "n": int(arr.size),
            "values": arr.tolist()}


def paired_difference(a: Mapping, b: Mapping) -> dict:
    """b minus a, seed by seed, for two `seed_spread`s over the same seeds: the spread of the
    differences plus `wins` (seeds where b > a)."""
    if a["n"] != b["n"]:
        raise DataError(f"paired comparison needs the same seeds ({a['n']} vs {b['n']} values)")
    diffs = [y - x for x, y in zip(a["values"], b["values"])]
    return {**seed_spread(diffs), "wins": sum(d > 0 for d in diffs)}


def correlation(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation of two equally long samples; None when either is constant."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape or a.size < 2:
        raise DataError("correlation needs two equally long samples of at least 2 values")
    if a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def best_of_n(rewards: Sequence[float], gold: Sequence[float], n: int) -> float:
    """Expected gold score of the best-of-n pick over a uniformly random n-subset of K scored
    candidates, computed exactly (the unbiased estimator of Nakano et al. 2021):

        E = sum_i C(i - 1, n - 1) / C(K, n) * gold_(i)

    with candidates sorted by reward ascending (i = 1..K): the i-th smallest is the pick of
    exactly the C(i - 1, n - 1) subsets whose other members all rank below it. Ties in reward
    go to the candidate sampled first (the lower index), as Python's `max` does over a subset in
    index order; the sort uses that order, so the estimator equals the brute-force average.

    Args:
        rewards, gold: shape (K,), each candidate's reward and gold score.
        n: subset size, 1 <= n <= K.
    """
    r, g = np.asarray(rewards, dtype=float), np.asarray(gold, dtype=float)
    k = r.size
    if r.shape != g.shape or r.ndim != 1 or k == 0:
        raise DataError(f"need one gold score per candidate (got {r.shape} and {g.shape})")
    if not 1 <= n <= k:
        raise DataError(f"n must lie in 1..{k}, got {n}")
    # rank by (reward, -index): among equal rewards the lower index ranks higher
    order = np.lexsort((-np.arange(k), r))
    total = comb(k, n)
    weights = np.array([comb(i, n - 1) for i in range(k)], dtype=float) / total
    return float(weights @ g[order])


def best_of_n_curve(
    rewards: Sequence[Sequence[float]], gold: Sequence[Sequence[float]], ns: Sequence[int]
) -> list[dict[str, float]]:
    """Mean over prompts of `best_of_n` for each n: [{n, mean, n_prompts}]; every prompt needs
    at least max(ns) candidates."""
    if len(rewards) != len(gold) or not rewards:
        raise DataError("need rewards and gold scores for the same, non-empty set of prompts")
    return [
        {"n": n, "mean": float(np.mean([best_of_n(r, g, n) for r, g in zip(rewards, gold)])),
         "n_prompts": len(rewards)}
        for n in ns
    ]


@dataclass(frozen=True)
class SwapCheck:
    """The swap check of one view on n pairs: `accuracy` and `ties` as scored; `swapped_accuracy`
    the share of pairs whose responses, scored in the other order, still rank the first-placed
    (the rejected) one higher; `expected` = 1 - accuracy - ties, what a reward model that scores
    each response on its own must give; `near_ties` the pairs within float tolerance of a tie,
    where the two may differ by rounding alone."""

    view: str
    accuracy: float
    ties: float
    swapped_accuracy: float
    expected: float
    near_ties: int
    n: int

    def to_dict(self) -> dict:
        return asdict(self)


def swap_check(rows: Sequence[Mapping], view: str, *, rtol: float = 1e-3, atol: float = 1e-4) -> SwapCheck:
    """The swap check from scored rows {id, <view>: [r_c, r_r], "swapped": [r_r', r_c']}.

    Raises:
        DataError naming the first pair whose swapped scores are not its scores reversed (within
        `rtol` / `atol`): the responses do not reach the model as the data says (a pairing bug).
    """
    if not rows:
        raise DataError("no scored pairs for the swap check")
    scored = np.asarray([r[view] for r in rows], dtype=float)  # [n, 2]: chosen, rejected
    swapped = np.asarray([r["swapped"] for r in rows], dtype=float)  # [n, 2]: rejected, chosen
    close = np.isclose(swapped[:, ::-1], scored, rtol=rtol, atol=atol).all(axis=1)
    if not close.all():
        k = int(np.argmin(close))
        raise DataError(
            f"swap check failed at pair {rows[k]['id']!r}: scored as (chosen, rejected) = "
            f"({scored[k, 0]:.6g}, {scored[k, 1]:.6g}) but swapped as (rejected, chosen) = "
            f"({swapped[k, 0]:.6g}, {swapped[k, 1]:.6g}); a reward model scores each response on "
            "its own, so the pairs do not reach it as the data says")
    chosen, rejected = scored[:, 0], scored[:, 1]
    accuracy, ties = float(np.mean(chosen > rejected)), float(np.mean(chosen == rejected))
    gap = np.abs(chosen - rejected)
    near = gap <= atol + rtol * np.maximum(np.abs(chosen), np.abs(rejected))
    return SwapCheck(view, accuracy, ties, float(np.mean(swapped[:, 0] > swapped[:, 1])),
                     1.0 - accuracy - ties, int(near.sum()), len(rows))


@dataclass
class RewardEvalMetrics:
    """Pairwise accuracy of one reward model per test environment and view.

    Attributes:
        primary: the view the model was trained on ("multimodal", or a text mode).
        views: every view scored (e.g. ["multimodal", "drop"]: the text-only test).
        per_env: {env: {view: PairAccuracy}}.
        overall: {view: PairAccuracy} over every pair.
        per_category: {category: {view: PairAccuracy}} for pairs whose benchmark names a
            category (VL-RewardBench, Multimodal RewardBench); empty otherwise.
        text_sfd: {group: SFD} of the primary view against the model's own text-only verdicts
            (the second view), keyed "env:NAME", "category:NAME" and "all"; empty without a
            text-only view.
        swap: the swap check of the primary view; None when it was not run.
    """

    primary: str
    views: list[str]
    per_env: dict[str, dict[str, PairAccuracy]]
    overall: dict[str, PairAccuracy]
    per_category: dict[str, dict[str, PairAccuracy]] = field(default_factory=dict)
    text_sfd: dict[str, SFD] = field(default_factory=dict)
    swap: SwapCheck | None = None

    @property
    def category_macro(self) -> float | None:
        """Mean of the per-category accuracies of the primary view (VL-RewardBench's macro
        average); None without categories."""
        values = [acc[self.primary].accuracy for acc in self.per_category.values()]
        return float(np.mean(values)) if values else None

    def to_dict(self) -> dict:
        def table(groups: Mapping[str, Mapping[str, PairAccuracy]]) -> dict:
            return {g: {v: a.to_dict() for v, a in d.items()} for g, d in groups.items()}

        return {
            "primary": self.primary,
            "views": list(self.views),
            "per_env": table(self.per_env),
            "overall": {v: a.to_dict() for v, a in self.overall.items()},
            "per_category": table(self.per_category),
            "category_macro": self.category_macro,
            "text_sfd": {g: sfd.to_dict() for g, sfd in self.text_sfd.items()},
            "swap": None if self.swap is None else self.swap.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> RewardEvalMetrics:
        def table(groups: Mapping) -> dict[str, dict[str, PairAccuracy]]:
            return {g: {v: PairAccuracy(**a) for v, a in d.items()} for g, d in groups.items()}

        swap = data.get("swap")
        return cls(
            data["primary"], list(data["views"]), table(data["per_env"]),
            {v: PairAccuracy(**a) for v, a in data["overall"].items()},
            table(data.get("per_category", {})),
            {g: SFD(**s) for g, s in data.get("text_sfd", {}).items()},
            None if swap is None else SwapCheck(**swap),
        )


def summarize_pair_rows(
    rows: Sequence[Mapping], views: Sequence[str], primary: str, *, n_boot: int = 1000,
    swap: SwapCheck | None = None,
) -> RewardEvalMetrics:
    """Accuracy per environment, category and view from scored rows {id, env, [category],
    <view>: [r_c, r_r]}, and the primary view's SFD against the second (text-only) view."""
    if not rows:
        raise DataError("no scored pairs to summarize")

    def accuracy(subset: Sequence[Mapping], view: str) -> PairAccuracy:
        return pairwise_accuracy([r[view][0] for r in subset], [r[view][1] for r in subset], n_boot=n_boot)

    def groups(key: str) -> dict[str, list[Mapping]]:
        found: dict[str, list[Mapping]] = {}
        for row in rows:
            if row.get(key) is not None:
                found.setdefault(str(row[key]), []).append(row)
        return dict(sorted(found.items()))

    def text_sfd(subset: Sequence[Mapping]) -> SFD:
        text = next(v for v in views if v != primary)
        return shortcut_failure_degradation([r[primary][0] > r[primary][1] for r in subset],
                                            [r[text][0] > r[text][1] for r in subset])

    per_env = {e: {v: accuracy(sub, v) for v in views} for e, sub in groups("env").items()}
    per_category = {c: {v: accuracy(sub, v) for v in views} for c, sub in groups("category").items()}
    sfd: dict[str, SFD] = {}
    if len(views) > 1:
        sfd = {f"{key}:{g}": text_sfd(sub) for key in ("env", "category") for g, sub in groups(key).items()}
        sfd["all"] = text_sfd(rows)
    return RewardEvalMetrics(primary, list(views), per_env, {v: accuracy(rows, v) for v in views},
                             per_category, sfd, swap)
