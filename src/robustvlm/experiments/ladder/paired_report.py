"""The invariance ladder's paired verdicts (`experiments.ladder.paired`) in its report: one sentence
per reading, and a table per reading of every method against ERM on the test environments."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from robustvlm.analysis.established import Interval, Perturbation, established_line
from robustvlm.analysis.selection import READINGS
from robustvlm.experiments.ladder.paired import LadderPaired, PairedVerdict
from robustvlm.experiments.ladder.readings import ENV_WORDS, MIN_MARGIN
from robustvlm.report.page import Block, Table
from robustvlm.report.paired_table import DASH, paired_section

READING_WORDS = {"final": "final step", "training-domain": "training-domain validation",
                 "oracle": "test-domain oracle selection"}
HEADER = ["rung", "environment", "method", "seeds beating ERM", "pictures x seeds", "difference (points)",
          "95% CI (paired bootstrap over pictures)", "McNemar p per seed", "separated",
          "pictures needed at 80% power"]
EXPLANATION = (
    "Every seed scores the same test pictures, so the seeds' agreement does not count the pictures' own "
    "sampling error. Here each method is paired with ERM picture by picture: per picture, its correctness "
    "averaged over the seeds both finished, minus ERM's; the interval is the paired bootstrap over pictures; "
    "each seed also gets the exact McNemar test of its discordant pictures. *Separated*: the interval "
    "excludes zero. The last column is the number of pictures (with these seeds) that a difference of the "
    f"observed size (at least {100 * MIN_MARGIN:g} point) needs to be detected at 80% power by a two-sided "
    "paired t-test at the 5% level, given the observed spread of the per-picture differences. Under "
    "test-domain oracle selection each run's step is chosen on these same pictures, so both sides are "
    "read at their luckiest and the interval is not a fresh test.")


def _needed(v: PairedVerdict) -> str:
    return DASH if v.needed is None else f"{int(-(-v.needed // 1)):,}"


def paired_row(cell: str, env: str, method: str, v: PairedVerdict) -> list[str]:
    """One row of the table (`HEADER`)."""
    c = v.paired.comparison
    seeds = ", ".join(f"{p:.2g}" for _, _, p in v.paired.seed_mcnemar.values())
    return [cell, ENV_WORDS.get(env, env), method, f"{v.seeds_won} of {v.seeds}", f"{c.n} x {v.seeds}",
            f"{100 * c.difference:+.1f}", f"[{100 * c.ci_lo:+.1f}, {100 * c.ci_hi:+.1f}]", seeds,
            "yes" if v.separated else "no", _needed(v)]


HEADLINE_READING = READINGS[0]
"""The reading the ladder's headline claims are made under (the IRM paper's protocol)."""


def ladder_claims(paired: LadderPaired, label: Callable[[str], str] = str) -> tuple[dict[str, Interval], dict[str, str]]:
    """The headline claims: every method against ERM on every rung and test environment at the
    final step, pooled over seeds ({"final/RUNG/METHOD/ENV": interval}), and how to name each."""
    claims, names = {}, {}
    for cell, methods in paired.get(HEADLINE_READING, {}).items():
        for method, by_env in methods.items():
            for env, v in by_env.items():
                key = f"{HEADLINE_READING}/{cell}/{method}/{env}"
                claims[key] = Interval.from_dict(v.paired.comparison.to_dict())
                names[key] = f"{label(method)} minus ERM on {cell} {ENV_WORDS.get(env, env)}"
    return claims, names


def ladder_established(paired: LadderPaired, perturbation: Perturbation | None,
                       label: Callable[[str], str] = str) -> str:
    """The verdict's first line: whether the ladder's headline claims are established
    (`analysis.established`)."""
    claims, names = ladder_claims(paired, label)
    return established_line(claims, perturbation, names)


def paired_sentence(paired: LadderPaired, reading: str, label: Callable[[str], str] = str) -> str | None:
    """How many comparisons with ERM under `reading` a paired test separates, and which (`label`
    names a method)."""
    found = [(cell, env, m, v) for cell, methods in paired.get(reading, {}).items()
             for m, by_env in methods.items() for env, v in by_env.items()]
    if not found:
        return None
    better = [f"{label(m)} on {cell} {ENV_WORDS.get(env, env)} ({100 * v.paired.comparison.difference:+.1f})"
              for cell, env, m, v in found if v.separated and v.paired.comparison.difference > 0]
    worse = sum(v.separated and v.paired.comparison.difference < 0 for *_, v in found)
    named = f": {'; '.join(better)}" if better else ""
    return (f"Paired over the test pictures, pooled over seeds ({READING_WORDS[reading]}): of {len(found)} "
            f"comparisons with ERM, {len(better)} separated in the method's favour{named}, {worse} in ERM's; "
            "the rest are within the test set's own noise.")


def paired_table(paired: LadderPaired, label: Callable[[str], str] = str) -> Table:
    """Every comparison with ERM under every reading, one row each (`HEADER` after a reading column)."""
    rows = [[READING_WORDS[reading], *paired_row(cell, env, label(m), v)] for reading, cells in paired.items()
            for cell, methods in cells.items() for m, by_env in methods.items() for env, v in by_env.items()]
    return Table(["reading", *HEADER], rows)


def paired_blocks(paired: LadderPaired, label: Callable[[str], str]) -> list[Block]:
    """A section per reading with the table of every comparison (`label` names a method)."""
    blocks: list[Block] = []
    for reading, cells in paired.items():
        rows = [paired_row(cell, env, label(m), v) for cell, methods in cells.items()
                for m, by_env in methods.items() for env, v in by_env.items()]
        explanation = f"As above, under {READING_WORDS[reading]}." if blocks else EXPLANATION
        blocks += paired_section(f"Paired test over pictures, {READING_WORDS[reading]}", explanation, HEADER, rows)
    return blocks


def runs_left_out(paired: Mapping[str, Mapping[str, Mapping[str, Mapping[str, PairedVerdict]]]]) -> int:
    """The largest number of runs any rung left out for lack of per-picture answers."""
    return max((v.left_out for cells in paired.values() for methods in cells.values()
                for by_env in methods.values() for v in by_env.values()), default=0)
