"""When a headline verdict is established: the rule every demo's verdict opens with.

The seeds sample the training noise; another CPU (its vector units, its BLAS kernels) is one more
draw of it, which training amplifies: the reward demo's o.o.d. difference read +1.3 ± 0.4 on one
2-core machine and -1.0 ± 4.3 on another, same commit and packages. So a headline claim is
*established* only when

1. its paired interval pooled over seeds is decided: it excludes zero (*separated*), and
2. a re-run of the same plan under a perturbation that changes only float rounding (`robustvlm
   demo NAME --kernels avx2` on an AVX-512 CPU: other kernels, same code, data and seeds) gives an
   interval on the same side of zero for every decided claim.

Otherwise the verdict's first line says "Not established" and why: no claim decided; decided but
no perturbation re-run recorded yet; or decided and flipped by the re-run (an interval that
crosses zero or lies on the other side). A perturbation re-run is recorded in the run's
results.json under `perturbation` (`Perturbation.to_dict`; `experiments.perturbation` records it).

Claims are named by key ("ood" for the reward demo; "READING/RUNG/METHOD/ENV" for the ladder) and
read as `Interval`s: a difference and its 95% interval in 0-1 units (shown in points).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Interval:
    """A paired difference (other minus base, 0-1 units) and its 95% interval."""

    difference: float
    ci_lo: float
    ci_hi: float

    @property
    def side(self) -> int:
        """+1 when the interval lies above zero, -1 below, 0 when it includes zero (undecided)."""
        return 1 if self.ci_lo > 0 else -1 if self.ci_hi < 0 else 0

    def text(self) -> str:
        """"+1.3 [+0.3, +2.4]" in points."""
        return f"{100 * self.difference:+.1f} [{100 * self.ci_lo:+.1f}, {100 * self.ci_hi:+.1f}]"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Interval:
        """From any dict holding `difference`, `ci_lo`, `ci_hi` (a `PairedComparison`'s)."""
        return cls(float(d["difference"]), float(d["ci_lo"]), float(d["ci_hi"]))


@dataclass(frozen=True)
class Perturbation:
    """A rounding-perturbation re-run of a run: `how` it differed (its kernels, e.g. "avx2
    kernels"), where it ran (`folder`), and the intervals of its claims, by key."""

    how: str
    folder: str
    claims: dict[str, Interval] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"how": self.how, "folder": self.folder,
                "claims": {k: {"difference": v.difference, "ci_lo": v.ci_lo, "ci_hi": v.ci_hi}
                           for k, v in self.claims.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Perturbation:
        return cls(str(d["how"]), str(d["folder"]), {k: Interval.from_dict(v) for k, v in d["claims"].items()})


RERUN_HINT = ("re-run the same command with `--kernels avx2` into another folder, then `python -m "
              "robustvlm.experiments.perturbation RUN RERUN`")


def established_line(claims: Mapping[str, Interval], perturbation: Perturbation | None,
                     names: Mapping[str, str] | None = None) -> str:
    """The verdict's first line under the rule of the module doc. `claims`: the headline paired
    intervals pooled over seeds, by key; `names`: how the line names each key (default: the key)."""
    named = dict(names or {})
    decided = {k: v for k, v in claims.items() if v.side != 0}

    def listed(keys: Mapping[str, Interval] | list[str]) -> str:
        return "; ".join(f"{named.get(k, k)} {claims[k].text()}" for k in keys)

    if not decided:
        shown = f" ({listed(list(claims))})" if claims else ""
        return ("Not established: no headline difference is decided; its paired interval pooled over seeds "
                f"includes zero{shown}.")
    if perturbation is None:
        return (f"Not established yet: decided pooled over seeds ({listed(decided)}), but no rounding-perturbation "
                f"re-run is recorded; {RERUN_HINT}.")
    flipped = [k for k, v in decided.items() if perturbation.claims.get(k) is None
               or perturbation.claims[k].side != v.side]
    if flipped:
        moved = "; ".join(f"{named.get(k, k)} {claims[k].text()} here, "
                          + (f"{perturbation.claims[k].text()}" if k in perturbation.claims else "not measured")
                          + " there" for k in flipped)
        return (f"Not established: the rounding-perturbation re-run ({perturbation.how}) flips the verdict: {moved}; "
                "the verdict hangs on float rounding.")
    return (f"Established: decided pooled over seeds ({listed(decided)}), and the rounding-perturbation re-run "
            f"({perturbation.how}) agrees ({'; '.join(perturbation.claims[k].text() for k in decided)}).")
