"""Powered verdicts: how many seeds and test examples a paired interval needs to be decided.

A claim compares two methods paired by seed: seed s gives a difference D_s (other minus base).
The seeds sample the training noise (another CPU is one more draw of it, `analysis.established`),
so the claim's interval is the paired t interval over S seeds, mean(D) ± t(S-1) · sd(D) / √S, and
it is *decided* when it is

- *separated*: it excludes zero (`power_to_separate`, `units_to_separate`), or
- *bounded*: it lies inside (-margin, +margin), so it excludes any effect larger than the stated
  margin (`power_to_bound`, `units_to_bound`; the two one-sided tests at 2.5% each).

Test examples enter through a two-level model of one seed's difference,
D_s = Δ + u_s + e_s: u_s the training noise, sd σ_u; e_s the mean of the seed's N per-example
paired differences, sd σ_e / √N. A seed's difference then has sd √(σ_u² + σ_e² / N)
(`Spread.seed_sd`), and a spread measured over seeds at N0 examples gives
σ_u² = max(sd² − σ_e² / N0, 0). The model treats the examples' noise as independent across seeds
(each seed its own test draw); where every seed scores the same examples, the part of it the
seeds share does not shrink with more seeds, and the pooled interval clustered by example
(`analysis.study_paired`) is the one to power: the same functions apply with units = examples
and sd = the per-example sd of the paired differences (se · √n, design effect included).

All functions take and return numbers in one unit of the caller's choosing (the command line:
accuracy points); "units" are seeds or examples, whichever the interval is over.

    python -m robustvlm.analysis.power --per-seed 1.5 0.8 1.7 --margin 1
    python -m robustvlm.analysis.power --interval 1.1 0.3 1.9 --n 3000
    python -m robustvlm.analysis.power --mean-sd 4.2 2.8 --n 3      # mean and sd of the differences
    python -m robustvlm.analysis.power --discordant 0 --n 100 --margin 1   # 0/1 outcomes, none changed
    python -m robustvlm.analysis.power RUN            # a `demo reward` / `demo ladder` output folder
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import integrate, stats

from robustvlm.analysis.paired import paired_t_power
from robustvlm.analysis.selection import READINGS
from robustvlm.analysis.stats import clopper_pearson
from robustvlm.errors import DataError, RobustVLMError

MAX_UNITS = 10**7
"""The largest design searched; a goal out of its reach reads None ("no design reaches it")."""
SHOWN_SEEDS = (3, 5, 10, 20)
"""The seed counts whose half-widths a claim over seeds shows; a claim over examples shows 1, 2,
4 and 10 times its own number."""
FINAL = READINGS[0]
"""The ladder's headline reading: each run's final step (`experiments.ladder.paired_report.HEADLINE_READING`)."""


def _t(units: float, alpha: float) -> float:
    return float(stats.t.ppf(1 - alpha / 2, units - 1))


def _check(sd: float, units: float, alpha: float) -> None:
    if not sd > 0 or not math.isfinite(sd):
        raise DataError(f"the spread of the paired differences must be a positive number (got {sd})")
    if units < 2:
        raise DataError(f"an interval over seeds or examples needs at least 2 of them (got {units})")
    if not 0 < alpha < 1:
        raise DataError(f"alpha must lie in (0, 1) (got {alpha})")


def half_width(sd: float, units: float, alpha: float = 0.05) -> float:
    """The paired t interval's half-width t(units-1) · sd / √units for differences of sd `sd`."""
    _check(sd, units, alpha)
    return _t(units, alpha) * sd / math.sqrt(units)


def power_to_separate(difference: float, sd: float, units: float, alpha: float = 0.05) -> float:
    """P(the interval over `units` excludes zero) when the true mean difference is `difference`
    (the two-sided paired t-test's power: noncentral t, as statsmodels' TTestPower)."""
    _check(sd, units, alpha)
    return paired_t_power(units, abs(difference) / sd, alpha)


def power_to_bound(margin: float, sd: float, units: float, alpha: float = 0.05, difference: float = 0.0) -> float:
    """P(the interval over `units` lies inside (-margin, +margin)) when the true mean difference is
    `difference`: the expectation, over the sample sd S (S² ~ sd² χ²(units-1) / (units-1)), of
    P(|mean - 0| < margin - t S / √units), by quadrature over the quantiles of χ²."""
    _check(sd, units, alpha)
    if not margin > 0:
        raise DataError(f"the margin an interval must exclude beyond must be positive (got {margin})")
    df, crit, se = units - 1, _t(units, alpha), sd / math.sqrt(units)
    edge = df * (margin / (crit * se)) ** 2  # χ² value at which the half-width reaches the margin

    def conditional(u: float) -> float:
        h = crit * se * math.sqrt(float(stats.chi2.ppf(u, df)) / df)
        if h >= margin:
            return 0.0
        return float(stats.norm.cdf((margin - h - difference) / se) - stats.norm.cdf((h - margin - difference) / se))

    top = float(stats.chi2.cdf(edge, df))
    return float(integrate.quad(conditional, 0.0, top, limit=200)[0]) if top > 0 else 0.0


def smallest_units(power_at: Callable[[int], float], target: float) -> int | None:
    """The smallest integer n in [2, MAX_UNITS] with power_at(n) >= target (power rising with n);
    None when even MAX_UNITS falls short."""
    if not 0 < target < 1:
        raise DataError(f"the power to reach must lie in (0, 1) (got {target})")
    low, high = 2, 2
    while power_at(high) < target:
        if high >= MAX_UNITS:
            return None
        low, high = high + 1, min(2 * high, MAX_UNITS)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if power_at(mid) >= target else (mid + 1, high)
    return low


def units_to_separate(difference: float, sd: float, power: float = 0.8, alpha: float = 0.05) -> int | None:
    """Seeds (or examples) the interval needs to exclude zero with probability `power` when the
    true difference is `difference`; None for a zero difference or beyond MAX_UNITS."""
    if difference == 0:
        return None
    return smallest_units(lambda n: power_to_separate(difference, sd, n, alpha), power)


def units_to_bound(margin: float, sd: float, power: float = 0.8, alpha: float = 0.05,
                   difference: float = 0.0) -> int | None:
    """Seeds (or examples) the interval needs to lie inside (-margin, +margin) with probability
    `power` when the true difference is `difference` (0: no effect); None when out of reach (a
    true difference at or beyond the margin, or more than MAX_UNITS)."""
    if abs(difference) >= margin:
        return None
    return smallest_units(lambda n: power_to_bound(margin, sd, n, alpha, difference), power)


@dataclass(frozen=True)
class Spread:
    """The measured spread of a claim's paired differences: `sd` over seeds, measured at `examples`
    test examples per seed whose per-example paired differences have sd `example_sd` (both None
    when unknown: the seed spread is then taken as it is, whatever the number of examples)."""

    sd: float
    examples: int | None = None
    example_sd: float | None = None

    @property
    def training_sd(self) -> float:
        """σ_u: the seed spread less the examples' share of it, √max(sd² - example_sd² / examples, 0)."""
        if self.examples is None or self.example_sd is None:
            return self.sd
        return math.sqrt(max(self.sd**2 - self.example_sd**2 / self.examples, 0.0))

    def seed_sd(self, examples: int | None = None) -> float:
        """The sd of one seed's difference at `examples` test examples (None: as measured)."""
        if examples is None or self.example_sd is None:
            return self.sd
        return math.sqrt(self.training_sd**2 + self.example_sd**2 / examples)


def examples_to_separate(difference: float, spread: Spread, seeds: int, power: float = 0.8,
                         alpha: float = 0.05) -> int | None:
    """Test examples per seed that `seeds` seeds need to separate `difference` with `power` under
    the two-level model (module doc); None when the training noise alone prevents it."""
    if spread.example_sd is None:
        raise DataError("the examples a design needs follow from the per-example sd of the paired differences")
    if difference == 0 or power_to_separate(difference, max(spread.training_sd, 1e-12), seeds, alpha) < power:
        return None
    return smallest_units(lambda n: power_to_separate(difference, spread.seed_sd(n), seeds, alpha), power)


def discordant_bound(discordant: int, examples: int, alpha: float = 0.05) -> float:
    """For 0/1 outcomes paired by example: the largest |difference| (0-1 units) consistent with
    `discordant` of `examples` changing correctness, the Clopper-Pearson upper limit of the
    discordant share (a difference is at most the share of examples whose correctness changed).
    It decides a claim of no effect where the t interval cannot: with no discordant example the
    paired differences have no spread at all."""
    return clopper_pearson(discordant, examples, alpha)[1]


def examples_to_bound_discordant(margin: float, share: float = 0.0, power: float = 0.8,
                                 alpha: float = 0.05) -> int | None:
    """Examples at which `discordant_bound` falls below `margin` (0-1 units) with probability
    `power` when each example changes correctness with probability `share` (the measured
    discordant share); None when the share is not below the margin or beyond MAX_UNITS. The
    power of a discrete count rises with n in a sawtooth; the search (`smallest_units`) takes
    the first n at power of its bisection, which for a share of 0 (power 0 or 1) is the smallest."""
    if not 0 <= share < margin <= 1:
        return None

    def power_at(n: int) -> float:
        """P(upper limit < margin) at n examples: the limit rises with the count k, so it is
        P(k <= the largest k whose limit is below the margin); k >= n · margin never is."""
        ks = np.arange(min(n, math.ceil(n * margin)) + 1)
        below = ks[stats.beta.ppf(1 - alpha / 2, ks + 1, n - ks) < margin]
        return float(stats.binom.cdf(below.max(), n, share)) if below.size else 0.0

    return smallest_units(power_at, power)


@dataclass(frozen=True)
class Claim:
    """A measured paired difference over `units` seeds or examples (`unit` names which) whose
    differences have sd `sd` (the interval's own spread); `name` says what it compares."""

    name: str
    difference: float
    sd: float
    units: int
    unit: str = "seeds"

    @classmethod
    def from_values(cls, name: str, values: Sequence[float]) -> Claim:
        """From the per-seed differences (shape (S,), S >= 2)."""
        d = np.asarray(values, dtype=float)
        if d.ndim != 1 or d.size < 2 or not np.isfinite(d).all():
            raise DataError(f"{name}: need at least two finite per-seed differences (got {list(values)})")
        return cls(name, float(d.mean()), float(d.std(ddof=1)), int(d.size))

    @classmethod
    def from_interval(cls, name: str, difference: float, lo: float, hi: float, units: int,
                      unit: str = "questions", alpha: float = 0.05) -> Claim:
        """From a printed interval [lo, hi] over `units`: sd = (hi - lo) / (2 t(units-1)) · √units."""
        if not lo <= difference <= hi or hi == lo:
            raise DataError(f"{name}: the interval [{lo}, {hi}] must be wider than a point and hold {difference}")
        if units < 2:
            raise DataError(f"{name}: an interval needs at least 2 {unit} (got {units})")
        return cls(name, difference, (hi - lo) / (2 * _t(units, alpha)) * math.sqrt(units), units, unit)


def power_lines(claim: Claim, *, margin: float | None = None, power: float = 0.8, alpha: float = 0.05,
                designs: Sequence[int] | None = None, example_sd: float | None = None,
                examples: int | None = None) -> list[str]:
    """The power computation of `claim`, in the claim's units, as plain lines (`main` prints them):
    its interval (symmetric, from its sd), the designs that decide it at `power` (separated; and
    bounded within ±`margin` when given), the half-widths of `designs` (default module doc), and
    with `example_sd` and `examples` (the per-example sd and count behind a seed's difference) the
    test examples per seed its seeds need (`examples_to_separate`)."""
    d, sd, n, unit = claim.difference, claim.sd, claim.units, claim.unit
    h = half_width(sd, n, alpha)
    side = "separated" if abs(d) > h else "not separated (it includes zero)"
    lines = [f"{claim.name}: {d:+.2f} over {n} {unit}, sd {sd:.2f}: 95% interval [{d - h:+.2f}, {d + h:+.2f}] "
             f"(half-width {h:.2f}), {side}; it excludes effects beyond {abs(d) + h:.2f}."]
    need = units_to_separate(d, sd, power, alpha)
    reach = "no number of " + unit if need is None else f"{need:,} {unit}"
    lines.append(f"  to separate a true difference of {d:+.2f} with {power:.0%} power: {reach} "
                 f"(power at {n}: {power_to_separate(d, sd, n, alpha):.2f}).")
    if margin is not None:
        bound = units_to_bound(margin, sd, power, alpha)
        lines.append(f"  to exclude every effect beyond ±{margin:g} with {power:.0%} power when there is none: "
                     + ("no number of " + unit if bound is None else f"{bound:,} {unit}")
                     + f" (power at {n}: {power_to_bound(margin, sd, n, alpha):.2f}).")
    if designs is None:
        designs = SHOWN_SEEDS if unit == "seeds" else [n * k for k in (1, 2, 4, 10)]
    shown = sorted({n, *designs} - {0, 1})
    lines.append(f"  half-width at {', '.join(map(str, shown))} {unit}: "
                 + ", ".join(f"{half_width(sd, m, alpha):.2f}" for m in shown) + ".")
    if example_sd is not None and examples is not None:
        spread = Spread(sd, examples, example_sd)
        found = examples_to_separate(d, spread, n, power, alpha)
        lines.append(f"  training noise alone: sd {spread.training_sd:.2f} (per-example sd {example_sd:g} over "
                     f"{examples:,} examples); test examples per seed that {n} {unit} need to separate {d:+.2f}: "
                     + ("none suffices (the training noise alone prevents it)" if found is None else f"{found:,}")
                     + ".")
    return lines


def discordant_lines(name: str, discordant: int, examples: int, *, margin: float | None = None,
                     power: float = 0.8, unit: str = "questions", alpha: float = 0.05) -> list[str]:
    """The bound on a 0/1 paired difference from its discordant count (`discordant_bound`), in
    points, and the examples a bound of ±`margin` points needs at the measured discordant share."""
    if not 0 <= discordant <= examples or examples < 1:
        raise DataError(f"{name}: need 0 <= discordant <= examples (got {discordant} of {examples})")
    bound = 100 * discordant_bound(discordant, examples, alpha)
    lines = [f"{name}: {discordant} of {examples} {unit} changed correctness, so the difference lies within "
             f"±{bound:.2f} (the share's 95% Clopper-Pearson upper limit): it excludes effects beyond {bound:.2f}."]
    if margin is not None:
        need = examples_to_bound_discordant(margin / 100, discordant / examples, power, alpha)
        lines.append(f"  to exclude every effect beyond ±{margin:g} with {power:.0%} power at this discordant share: "
                     + (f"no number of {unit}" if need is None else f"{need:,} {unit}") + ".")
    return lines


def run_claims(results: Mapping[str, Any]) -> list[Claim]:
    """The headline claims of a `demo reward` (its comparison: o.o.d. seed by seed, and pair by pair
    pooled over seeds) or `demo ladder` (its paired tests at the final step, pooled over seeds)
    results.json, in points."""
    if "comparison" in results:
        comparison = results["comparison"]
        found = []
        ood = comparison.get("ood")
        if ood and len(ood.get("values", [])) >= 2:
            found.append(Claim.from_values("o.o.d. shortcut_aware minus standard, seed by seed",
                                           [100 * v for v in ood["values"]]))
        pooled = (comparison.get("paired") or {}).get("ood")
        if pooled:
            found.append(_pooled("o.o.d. shortcut_aware minus standard, pair by pair pooled over seeds", pooled))
        return found
    if "paired" in results:
        return [_pooled(f"{cell} {method} minus ERM on {env}", v)
                for cell, methods in results["paired"].get(FINAL, {}).items()
                for method, by_env in methods.items() for env, v in by_env.items()]
    raise DataError("results.json holds neither a reward demo's comparison nor a ladder's paired tests")


def _pooled(name: str, v: Mapping[str, Any]) -> Claim:
    """A pooled paired comparison (`PairedComparison.to_dict`, 0-1 units) as a claim over its
    questions, in points: sd = se · √n (the design effect of its clustering included)."""
    n, se = int(v["n"]), float(v["se"])
    if not math.isfinite(se) or se <= 0 or n < 2:
        raise DataError(f"{name}: its pooled comparison has no spread to power (n {n}, se {se})")
    return Claim(name, 100 * float(v["difference"]), 100 * se * math.sqrt(n), n, "questions")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m robustvlm.analysis.power", description=__doc__.strip().splitlines()[0],
        epilog="example: python -m robustvlm.analysis.power --per-seed 1.5 0.8 1.7 --margin 1")
    parser.add_argument("run", nargs="?", help="a `demo reward` or `demo ladder` output folder (its results.json)")
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--per-seed", nargs="+", type=float, metavar="D",
                       help="the claim's paired differences, one per seed (points)")
    given.add_argument("--interval", nargs=3, type=float, metavar=("D", "LO", "HI"),
                       help="a printed difference and its 95%% interval (points), over --n questions (or --unit)")
    given.add_argument("--discordant", type=int, metavar="K",
                       help="0/1 outcomes: K of --n questions changed correctness between the two sides")
    given.add_argument("--mean-sd", nargs=2, type=float, metavar=("D", "SD"),
                       help="a mean paired difference and the sd of the paired differences (points), over --n "
                            "seeds (or --unit)")
    parser.add_argument("--n", type=int, help="the seeds or questions the --interval or --mean-sd is over")
    parser.add_argument("--unit", help="what --n counts (default: questions for --interval, seeds for --mean-sd)")
    parser.add_argument("--name", default="claim", help="how the lines name the claim")
    parser.add_argument("--margin", type=float, help="also: the design whose interval excludes every effect beyond "
                                                     "±MARGIN (points) when there is none")
    parser.add_argument("--power", type=float, default=0.8, help="the power a design must reach (default 0.8)")
    parser.add_argument("--example-sd", type=float, help="with --per-seed: the sd of the per-example paired "
                                                         "differences (points; a 0/1 score's is up to 100)")
    parser.add_argument("--examples", type=int, help="with --per-seed: the test examples each seed scored")
    return parser


def _claims(args: argparse.Namespace) -> list[Claim]:
    if args.per_seed:
        return [Claim.from_values(args.name, args.per_seed)]
    if args.interval or args.mean_sd:
        if args.n is None:
            raise DataError(f"{'--interval' if args.interval else '--mean-sd'} needs --n, the seeds or questions "
                            "it is over")
        if args.interval:
            d, lo, hi = args.interval
            return [Claim.from_interval(args.name, d, lo, hi, args.n, args.unit or "questions")]
        return [Claim(args.name, args.mean_sd[0], args.mean_sd[1], args.n, args.unit or "seeds")]
    if args.run is None:
        raise DataError("give a run folder, --per-seed or --interval")
    path = Path(args.run) / "results.json"
    if not path.is_file():
        raise DataError(f"{path} not found: give the output folder of a `robustvlm demo reward` or `demo ladder` run")
    try:
        return run_claims(json.loads(path.read_text(encoding="utf-8")))
    except (KeyError, TypeError, ValueError) as err:
        raise DataError(f"{path}: not a demo's results ({type(err).__name__}: {err})") from err


def _lines(args: argparse.Namespace) -> list[str]:
    """The power computation of the claims `args` give (`_parser`)."""
    if args.discordant is not None:
        if args.n is None:
            raise DataError("--discordant needs --n, the questions it is out of")
        return discordant_lines(args.name, args.discordant, args.n, margin=args.margin, power=args.power,
                                unit=args.unit or "questions")
    extra = {"example_sd": args.example_sd, "examples": args.examples} if args.per_seed else {}
    return [line for claim in _claims(args)
            for line in power_lines(claim, margin=args.margin, power=args.power, **extra)]


def main(argv: list[str]) -> int:
    """Print the power computation of the claims given; 2 with a one-line error."""
    args = _parser().parse_args(argv)
    try:
        lines = _lines(args)
    except RobustVLMError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
