"""Zoo II's figure kinds (`report.icl_policy`, `report.zoo_card`, the diagnosis table) through
`figures.write`, each against an independent computation from the same results: the policy
costs' paired bootstrap intervals recomputed with numpy (and near scipy's paired bootstrap), the
card's Wilson intervals with statsmodels, the emergence step and the diagnosis verdicts by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from paired_reference import bootstrap, parse_interval
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from robustvlm.analysis.diagnosis import diagnose_table
from robustvlm.errors import ConfigError
from robustvlm.figures.write import main, render
from robustvlm.models.zoo_recipes import member_dir, recipe
from robustvlm.report.figure_blocks import read_figure, read_stamp
from robustvlm.report.figure_sources import experiment_of, sources_hash
from robustvlm.report.figure_stamps import Stamp
from robustvlm.report.zoo_card import thinned

DOMAINS = ("clean", "rotated")
POLICIES = ("random", "same-domain", "label-shift")
N = 60


def _records(rng: np.random.Generator) -> tuple[list[dict], dict[tuple[int, str, str], np.ndarray]]:
    """icl eval records with random right/wrong answers (0 shots; 1 and 2 shots per policy), and
    the 0/1 scores per (shots, policy, domain) in query order."""
    records: list[dict] = []
    scores: dict[tuple[int, str, str], np.ndarray] = {}
    settings = [(0, "zero-shot")] + [(k, p) for k in (1, 2) for p in POLICIES]
    for k, policy in settings:
        for d, domain in enumerate(DOMAINS):
            right = rng.random(N) < 0.3 + 0.2 * d + 0.1 * k
            scores[(k, policy, domain)] = right.astype(float)
            records += [{"shots": k, "policy": policy, "id": f"{domain}{i}", "domain": domain, "target": "coat",
                         "answer": "coat" if r else "bag", "correct": bool(r), "demos": []}
                        for i, r in enumerate(right)]
    return records, scores


def _rows(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines()[2:]]


def test_policy_costs_match_an_independent_pairedbootstrap(tmp_path: Path) -> None:
    records, scores = _records(np.random.default_rng(3))
    (tmp_path / "icl_predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    table = render("icl-policy-cost:m", tmp_path)
    assert table.splitlines()[0] == ("| query domain | shots | n | 0-shot | random | random - 0-shot [95% CI] | "
                                     "cost of same-domain [95% CI] | cost of label-shift [95% CI] |")
    rows = _rows(table)
    assert [(r[0], r[1]) for r in rows] == [(d, str(k)) for d in DOMAINS for k in (1, 2)]
    for row in rows:
        domain, k = row[0], int(row[1])
        base, zero = scores[(k, "random", domain)], scores[(0, "zero-shot", domain)]
        assert row[2:5] == [str(N), f"{zero.mean():.3f}", f"{base.mean():.3f}"]
        for cell, other in zip(row[5:], [zero, scores[(k, "same-domain", domain)], scores[(k, "label-shift", domain)]]):
            d = (base - other)[sorted(range(N), key=lambda i: f"{domain}{i}")]  # resampled in query-id order
            mean, lo, hi = parse_interval(cell)
            assert mean == pytest.approx(d.mean(), abs=5e-4)
            assert (lo, hi) == pytest.approx(bootstrap(d), abs=5e-4)
            ref = stats.bootstrap((base, other), lambda a, b: np.mean(a - b), paired=True, vectorized=False,
                                  n_resamples=2000, method="percentile", random_state=1).confidence_interval
            assert (lo, hi) == pytest.approx((ref.low, ref.high), abs=0.04)


def test_policy_costs_need_zero_shot_and_random(tmp_path: Path) -> None:
    records, _ = _records(np.random.default_rng(0))
    (tmp_path / "icl_predictions.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records if r["policy"] != "random"))
    with pytest.raises(Exception, match="--demos random"):
        render("icl-policy-cost:m", tmp_path)


def test_diagnosis_table_names_every_failing_stage(tmp_path: Path) -> None:
    measured = [{"domain": "clean", "n_classes": 10, "probe_acc": 0.8, "semantic_acc": 0.1, "zero_shot_acc": 0.87,
                 "icl_acc": 0.9},
                {"domain": "inverted", "n_classes": 10, "probe_acc": 0.46, "semantic_acc": 0.9, "zero_shot_acc": 0.08,
                 "icl_acc": 0.08}]
    (tmp_path / "diagnosis.json").write_text(json.dumps({"rows": diagnose_table(measured)}))
    rows = _rows(render("diagnose:m", tmp_path))
    # skills (acc - 0.1) / 0.9 against 0.5: clean semantic 0.0 fails; inverted probe 0.4 and task 0.0 fail
    assert rows[0] == ["clean", "10", "0.800", "0.100", "0.870", "0.900", "0.030", "semantic", "semantic"]
    assert rows[1] == ["inverted", "10", "0.460", "0.900", "0.080", "0.080", "0.000", "visual, mapping", "visual"]


def _card(emerge_at: int) -> dict:
    """A curriculum card: a recall curve of 40 windows of 50 steps whose loss halves past its
    level at window `emerge_at`, an episode curve that never does, and a tune stage."""
    recall = [{"step": 50 * (i + 1), "loss": 2.0 if i < emerge_at else 0.4, "accuracy": 0.3, "level": 1.3}
              for i in range(40)]
    episodes = [{"step": 50 * (i + 1), "loss": 0.7, "accuracy": 0.5, "level": 0.69} for i in range(6)]
    return {"name": "quick-llava-curriculum", "eval_images": 2000, "heldout_accuracy": 1637 / 2000,
            "defined_label_trials": 200, "cpu_seconds": 10.0,
            "defined_label_accuracy": {"2-way": 0.78, "2-way 0-shot": 0.5, "4-way": 0.41, "4-way 0-shot": 0.25},
            "stages": [{"stage": "recall", "steps": 2000, "final_loss": 0.41, "cpu_seconds": 5.0, "curve": recall,
                        "emergence_step": next(w["step"] for w in recall if w["loss"] < w["level"] / 2)},
                       {"stage": "episodes", "steps": 300, "final_loss": 0.69, "cpu_seconds": 4.0, "curve": episodes,
                        "emergence_step": None},
                       {"stage": "tune", "steps": 10, "final_loss": 0.3, "cpu_seconds": 1.0}]}


def test_the_card_tables_match_hand_counts_and_statsmodels(tmp_path: Path) -> None:
    (tmp_path / "zoo_member.json").write_text(json.dumps(_card(emerge_at=17)))
    card = _rows(render("zoo-card:m", tmp_path))
    lo, hi = proportion_confint(1637, 2000, method="wilson")
    assert card[0] == ["10-way question, held-out test pictures", "2000", f"0.819 [{lo:.3f}, {hi:.3f}]", "0.100"]
    lo, hi = proportion_confint(156, 200, method="wilson")
    assert card[1] == ["defined labels, 2 ways, one demonstration per class", "200", f"0.780 [{lo:.3f}, {hi:.3f}]",
                       "0.500"]
    assert card[2][0] == "defined labels, 2 ways, no demonstration" and card[4][3] == "0.250"
    stages = _rows(render("curriculum-stages:m", tmp_path))
    assert [r[0] for r in stages] == ["recall", "episodes", "tune"]
    assert stages[0][4] == "900" and stages[1][4] == "not within the steps" and stages[2][4] == "—"
    assert stages[0][5:] == ["0.400", "0.300", "1.300"]
    curve = _rows(render("curriculum-curve:m", tmp_path))
    recall_steps = [int(r[1].replace(",", "")) for r in curve if r[0] == "recall"]
    assert 900 in recall_steps and recall_steps[0] == 50 and recall_steps[-1] == 2000
    assert len(recall_steps) <= 16 + 2 and recall_steps == sorted(recall_steps)
    assert [r for r in curve if r[1] == "900" and r[0] == "recall"][0][5] == f"{0.4 / 1.3:.2f}"
    assert len([r for r in curve if r[0] == "episodes"]) == 6


def test_thinning_keeps_first_last_and_emergence() -> None:
    curve = [{"step": s} for s in range(10, 810, 10)]
    kept = [w["step"] for w in thinned(curve, 370, rows=8)]
    assert kept == [10, 100, 200, 300, 370, 400, 500, 600, 700, 800]


def test_a_card_without_a_curriculum_is_refused(tmp_path: Path) -> None:
    card = _card(emerge_at=3)
    card["stages"] = card["stages"][2:]
    (tmp_path / "zoo_member.json").write_text(json.dumps(card))
    with pytest.raises(Exception, match="no curriculum curve"):
        render("curriculum-curve:m", tmp_path)


def test_a_zoo_member_is_named_as_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="zoo:quick-llava-curriculum is not built"):
        render("zoo-card:x", "zoo:quick-llava-curriculum")
    folder = member_dir(recipe("quick-llava-curriculum"))
    folder.mkdir(parents=True)
    (folder / "zoo_member.json").write_text(json.dumps(_card(emerge_at=3)))
    assert render("zoo-card:x", "zoo:quick-llava-curriculum") == render("zoo-card:x", folder)


def test_the_curriculum_members_figures_belong_to_zoo_ii() -> None:
    assert experiment_of("icl-gain:llava-clip-m-curriculum") == "zoo-ii"
    assert experiment_of("icl-defined-labels:llava-clip-m-curriculum-4-shots") == "zoo-ii"
    assert experiment_of("icl-gain:llava-clip-m-icl") == "icl" == experiment_of("icl-gain")
    assert sources_hash("diagnose:m") == sources_hash("icl-gain:llava-clip-m-curriculum") != sources_hash("icl-gain")


def test_a_pending_block_is_empty_until_its_run_fills_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("robustvlm.figures.write.current_commit", lambda: "def5678")
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- figure:diagnose:m -->\n| old |\n<!-- /figure:diagnose:m -->\n")
    assert main([str(doc), "diagnose:m", "--pending"]) == 0
    text = doc.read_text()
    assert read_figure(text, "diagnose:m") == ""
    assert "_Not measured yet: `make figures zoo-ii` writes this figure._" in text
    assert read_stamp(text, "diagnose:m") == Stamp("pending", how="zoo-ii")
    run = tmp_path / "run"
    run.mkdir()
    (run / "diagnosis.json").write_text(json.dumps({"rows": diagnose_table(
        [{"domain": "clean", "n_classes": 2, "probe_acc": 1.0, "semantic_acc": 1.0, "zero_shot_acc": 1.0}])}))
    assert main([str(doc), f"diagnose:m={run}"]) == 0
    assert read_stamp(doc.read_text(), "diagnose:m") == Stamp("measured", "def5678", sources_hash("diagnose"))
    assert read_figure(doc.read_text(), "diagnose:m").startswith("| domain | classes |")
