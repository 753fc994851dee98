"""The reward demo's verdict: whether shortcut-aware training lowered SFD and raised o.o.d. accuracy
against standard training, seed by seed, in plain sentences (pure functions on the paired
differences of `analysis.reward.paired_difference`, fractions; written in accuracy points), and
pair by pair on the shared test pairs (`experiments.reward.paired`). Its first line says whether the
headline, the o.o.d. difference pair by pair pooled over seeds, is established
(`analysis.established`)."""

from __future__ import annotations

from collections.abc import Mapping

from robustvlm.analysis.established import Interval, Perturbation, established_line


def _points(diff: Mapping) -> str:
    """"+2.1 ± 0.4": the mean difference in points, ± the sd over seeds when there are several."""
    mean = f"{100 * diff['mean']:+.1f}"
    return mean if diff.get("std") is None else f"{mean} ± {100 * diff['std']:.1f}"


def _seeds(diff: Mapping) -> str:
    return ", ".join(f"{100 * v:+.1f}" for v in diff["values"])


def paired_sentence(paired: Mapping, *, base: str, other: str, group: str = "ood") -> str | None:
    """The pair-by-pair test of `group` (`experiments.reward.paired`: a `PairedVerdict` as a dict),
    in points; None when it was not computed."""
    v = paired.get(group)
    if v is None:
        return None
    seeds = ", ".join(f"{t['p']:.2g}" for t in v["mcnemar_per_seed"].values())
    call = ("the interval excludes zero" if v["ci_lo"] > 0 or v["ci_hi"] < 0
            else "the interval includes zero: within the test set's own noise")
    needed = "" if v["needed"] is None else (
        f"; a difference of this size (at least 1 point) needs about {v['needed']:,.0f} questions at 80% power")
    return (f"Pair by pair ({group.replace('ood', 'o.o.d.').replace('iid', 'i.i.d.')} questions: each (training "
            f"environment, test pair), correctness averaged over {v['seeds']} seed(s), bootstrap clustered by "
            f"test pair), `{other}` minus `{base}`: {100 * v['difference']:+.1f} points, 95% CI "
            f"[{100 * v['ci_lo']:+.1f}, {100 * v['ci_hi']:+.1f}] over {v['n']} questions; {call}; exact McNemar "
            f"p per seed {seeds}{needed}.")


def reward_claims(comparison: Mapping[str, Mapping | None]) -> dict[str, Interval]:
    """The headline claim of a comparison: {"ood": the o.o.d. pair-by-pair difference pooled over
    seeds} ({} when it was not computed)."""
    ood = (comparison.get("paired") or {}).get("ood")
    return {"ood": Interval.from_dict(ood)} if ood else {}


def reward_established(comparison: Mapping[str, Mapping | None], perturbation: Perturbation | None, *,
                       base: str = "standard", other: str = "shortcut_aware") -> str:
    """The verdict's first line: whether the headline (`reward_claims`) is established."""
    return established_line(reward_claims(comparison), perturbation,
                            {"ood": f"o.o.d. `{other}` minus `{base}`, pair by pair"})


def reward_verdict(comparison: Mapping[str, Mapping | None], *, base: str = "standard",
                   other: str = "shortcut_aware", sfd_cells: str | None = None) -> list[str]:
    """Plain sentences on whether `other` lowered SFD and raised o.o.d. accuracy against `base`,
    seed by seed (paired differences in accuracy points); `sfd_cells` ("k of n") says how many
    o.o.d. cells the mean SFD covers. The first sentence says whether the headline is established
    (no rounding-perturbation re-run is known when the demo writes it: `experiments.perturbation`
    rewrites it once one is recorded); with one seed the next says that nothing can be concluded."""
    ood, sfd, iid = comparison["ood"], comparison["sfd"], comparison["iid"]
    lines = [reward_established(comparison, None, base=base, other=other)]
    n_seeds = next((c["n"] for c in (ood, sfd, iid) if c is not None), 0)
    if n_seeds == 1:
        lines.append("One seed only: a smoke test. The figures below carry no spread and support no "
                     "conclusion; run the full demo for one.")
    lines.append("Every reward model is read at its last training step (no model selection); differences "
                 "are paired by seed.")
    if ood is not None:
        lines.append(
            f"o.o.d. accuracy, `{other}` minus `{base}`: {_points(ood)} points "
            f"(per seed {_seeds(ood)}); higher in {ood['wins']} of {ood['n']} seed(s).")
    if sfd is not None:
        lower = sum(v < 0 for v in sfd["values"])
        lines.append(
            f"Mean SFD over o.o.d. cells{f' (cells with a defined SFD: {sfd_cells})' if sfd_cells else ''}, "
            f"`{other}` minus `{base}`: {_points(sfd)} points "
            f"(per seed {_seeds(sfd)}); lower in {lower} of {sfd['n']} seed(s).")
    paired = paired_sentence(comparison.get("paired") or {}, base=base, other=other)
    if paired is not None:
        lines.append(paired)
    if iid is not None:
        lines.append(f"i.i.d. accuracy changed by {_points(iid)} points (per seed {_seeds(iid)}).")
    if ood is not None and sfd is not None:
        helped_ood = ood["wins"] == ood["n"]
        helped_sfd = lower == sfd["n"]
        if helped_ood and helped_sfd:
            call = ("On this data, shortcut-aware training helped: it raised o.o.d. accuracy and "
                    "lowered SFD in every seed.")
        elif ood["wins"] == 0 and lower == 0:
            call = ("On this data, shortcut-aware training did not help: o.o.d. accuracy did not rise "
                    "and SFD did not fall in any seed.")
        else:
            call = (f"On this data the result is mixed: o.o.d. accuracy rose in {ood['wins']} of "
                    f"{ood['n']} seed(s) and SFD fell in {lower} of {sfd['n']}, not both in every "
                    "seed; read the spread above before drawing a conclusion.")
        lines.append(call + _noise_caveat(comparison.get("paired") or {}))
    return lines


def _noise_caveat(paired: Mapping) -> str:
    """" ...": where the o.o.d. pair-by-pair interval includes zero, that the call above is within
    the test set's own noise ("" when it excludes zero or was not computed)."""
    v = paired.get("ood")
    if v is None or v["ci_lo"] > 0 or v["ci_hi"] < 0:
        return ""
    return (" Pair by pair the o.o.d. difference is within the test set's own noise (its interval includes "
            "zero), whatever the seeds' count says.")
