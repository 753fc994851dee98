"""The rule a headline verdict opens with (`analysis.established`): decided pooled over seeds, and
not flipped by a rounding-perturbation re-run; on synthetic paired data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robustvlm.analysis.established import Interval, Perturbation, established_line
from robustvlm.experiments.perturbation import main, perturbation_of
from robustvlm.experiments.reward.verdict import reward_verdict

DECIDED = Interval(0.013, 0.004, 0.022)
UNDECIDED = Interval(-0.010, -0.05, 0.033)


def _interval(diffs: np.ndarray) -> Interval:
    """A paired difference and a 95% normal interval from per-question differences (independent of
    the bootstrap the demos use: only its side of zero matters here)."""
    half = 1.96 * diffs.std(ddof=1) / np.sqrt(len(diffs))
    return Interval(float(diffs.mean()), float(diffs.mean() - half), float(diffs.mean() + half))


def test_synthetic_paired_data_decided_undecided_and_flipped():
    rng = np.random.default_rng(0)
    decided = _interval(rng.normal(0.05, 0.2, 2000))      # a real effect: the interval lies above zero
    undecided = _interval(rng.normal(0.0, 0.2, 2000))     # none: it straddles zero
    flipped = _interval(rng.normal(-0.05, 0.2, 2000))     # the re-run reads the other way
    assert (decided.side, undecided.side, flipped.side) == (1, 0, -1)
    assert established_line({"ood": undecided}, None).startswith("Not established: no headline difference")
    assert established_line({"ood": decided}, None).startswith("Not established yet:")
    agree = Perturbation("avx2 kernels", "rerun", {"ood": _interval(rng.normal(0.05, 0.2, 2000))})
    assert established_line({"ood": decided}, agree).startswith("Established:")
    assert established_line({"ood": decided}, Perturbation("avx2", "r", {"ood": flipped})).startswith(
        "Not established: the rounding-perturbation re-run (avx2) flips the verdict")
    crossing = Perturbation("avx2", "r", {"ood": undecided})  # a re-run that merely loses the decision flips it too
    assert established_line({"ood": decided}, crossing).startswith("Not established: the rounding")
    assert established_line({"ood": decided}, Perturbation("avx2", "r", {})).endswith("hangs on float rounding.")


def test_an_undecided_claim_beside_a_decided_one_does_not_need_the_rerun():
    claims = {"a": DECIDED, "b": UNDECIDED}
    line = established_line(claims, Perturbation("avx2", "r", {"a": Interval(0.02, 0.01, 0.03), "b": Interval(
        0.02, 0.01, 0.03)}), {"a": "claim A"})
    assert line.startswith("Established: decided pooled over seeds (claim A +1.3 [+0.4, +2.2])")


def _comparison(interval: Interval | None) -> dict:
    seeds = {"mean": 0.01, "std": 0.004, "values": [0.01, 0.012, 0.008], "wins": 3, "n": 3}
    paired = {} if interval is None else {"ood": {
        "difference": interval.difference, "ci_lo": interval.ci_lo, "ci_hi": interval.ci_hi, "n": 96, "seeds": 3,
        "needed": None, "mcnemar_per_seed": {"0": {"p": 0.5}}}}
    return {"ood": seeds, "sfd": {**seeds, "values": [-0.01, -0.02, -0.01]}, "iid": seeds, "paired": paired}


@pytest.mark.parametrize(("interval", "first"), [(DECIDED, "Not established yet:"),
                                                 (UNDECIDED, "Not established: no headline"),
                                                 (None, "Not established: no headline")])
def test_the_reward_verdict_opens_with_the_rule(interval, first):
    lines = reward_verdict(_comparison(interval))
    assert lines[0].startswith(first)
    assert "every seed" in lines[-1]  # the seeds' count is still reported below it


def _run(folder, interval: Interval, kernels: str, plan: dict) -> None:
    folder.mkdir()
    machine = {"kernels": kernels, "torch": {"capability": "AVX2" if kernels == "avx2" else "AVX512"}}
    (folder / "results.json").write_text(json.dumps({"plan": plan, "comparison": _comparison(interval),
                                                     "machine": machine}))
    (folder / "report.md").write_text("# Demo\n\n## Verdict\n\n" + reward_verdict(_comparison(interval))[0]
                                      + "\n\nOne seed only: ...\n")


def test_recording_a_rerun_rewrites_the_first_line_and_results_json(tmp_path, capsys):
    plan = {"seeds": [0, 1, 2]}
    _run(tmp_path / "run", DECIDED, "native", plan)
    _run(tmp_path / "agree", Interval(0.011, 0.002, 0.02), "avx2", plan)
    _run(tmp_path / "flip", UNDECIDED, "avx2", plan)
    _run(tmp_path / "same", DECIDED, "native", plan)
    _run(tmp_path / "other", DECIDED, "avx2", {"seeds": [0]})
    assert main([str(tmp_path / "run"), str(tmp_path / "same")]) == 2
    assert "both ran on native kernels" in capsys.readouterr().err
    assert main([str(tmp_path / "run"), str(tmp_path / "other")]) == 2
    assert "different plans" in capsys.readouterr().err
    assert main([str(tmp_path / "run"), str(tmp_path / "flip")]) == 0
    assert capsys.readouterr().out.startswith("Not established: the rounding-perturbation re-run (avx2 kernels "
                                              "(torch AVX2) against native kernels (torch AVX512)) flips")
    assert main([str(tmp_path / "run"), str(tmp_path / "agree")]) == 0
    report = (tmp_path / "run" / "report.md").read_text()
    assert report.split("## Verdict\n\n")[1].startswith("Established: decided") and "One seed only" in report
    stored = json.loads((tmp_path / "run" / "results.json").read_text())["perturbation"]
    assert Perturbation.from_dict(stored) == perturbation_of(tmp_path / "run", tmp_path / "agree")[0]
    assert stored["claims"]["ood"]["ci_lo"] == 0.002


def _verdict(interval: Interval) -> dict:
    """A ladder `PairedVerdict` as results.json holds it."""
    return {"n": 500, "clusters": 500, "mean_a": 0.6, "mean_b": 0.6 + interval.difference, "se": 0.01,
            "difference": interval.difference, "ci_lo": interval.ci_lo, "ci_hi": interval.ci_hi, "only_a": None,
            "only_b": None, "mcnemar_p": None, "power_delta": 0.01, "questions_needed": None, "undecided": 0,
            "mcnemar_per_seed": {"0": {"only_method": 3, "only_baseline": 1, "p": 0.6}}, "seeds_won": 3,
            "seeds": 3, "needed": None, "left_out": 0}


def test_the_ladder_verdict_opens_with_the_rule_over_its_final_step_claims():
    from robustvlm.experiments.ladder.paired import paired_from_dict
    from robustvlm.experiments.ladder.paired_report import ladder_claims, ladder_established

    paired = paired_from_dict({
        "final": {"pixels": {"birm_dynamic": {"test-nocolour": _verdict(DECIDED), "test-reversed": _verdict(UNDECIDED)}}},
        "oracle": {"pixels": {"birm_dynamic": {"test-nocolour": _verdict(UNDECIDED)}}},  # not a headline reading
    })
    claims, _ = ladder_claims(paired)
    assert claims == {"final/pixels/birm_dynamic/test-nocolour": DECIDED, "final/pixels/birm_dynamic/test-reversed": UNDECIDED}
    assert ladder_established(paired, None).startswith("Not established yet: decided pooled over seeds (birm_dynamic "
                                                       "minus ERM on pixels")
    rerun = Perturbation("avx2", "r", {"final/pixels/birm_dynamic/test-nocolour": Interval(-0.01, -0.02, -0.001)})
    assert ladder_established(paired, rerun).startswith("Not established: the rounding-perturbation re-run (avx2) flips")
