"""The Results pages' pictures (`figures.images.IMAGES`) drawn from results fixtures: each
writes a PNG, and what it draws is checked against an independent computation (the probit line by
scipy's linregress, Wilson intervals by their closed form, the accuracies by counting)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer
from scipy import stats

import robustvlm.report.icl_curves as icl_curves_module
import robustvlm.report.line_scatter as line_scatter_module
import robustvlm.report.plots as plots_module
import robustvlm.report.study_report as study_report_module
from robustvlm.analysis.accuracy_on_the_line import ModelPoint, fit_robustness
from robustvlm.analysis.study import MethodRuns, StudyResults, aggregate_study
from robustvlm.experiments.robustness.zoo_report import ZooMember, ZooRobustnessResults, ZooShift
from robustvlm.figures.images import IMAGES, draw_image
from robustvlm.report.icl_gain import defined_labels_summary

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
Z = stats.norm.ppf(0.975)
DUALS = {"clip-a": 0.40, "clip-b": 0.60, "clip-c": 0.75, "clip-d": 0.90}  # reference accuracies
OTHERS = {"vlm-a": ("vlm", 0.55), "vlm-b": ("vlm", 0.80), "embed-a": ("embedding", 0.70)}
SHIFT_DROP = {"rotated": 0.25, "noisy": 0.05}


@pytest.fixture
def drawn(monkeypatch):
    """The Figures the plotting modules save (in order), besides writing them."""
    figures = []
    for module in (line_scatter_module, icl_curves_module, plots_module, study_report_module):
        original = module.save_figure

        def keep(fig, path, original=original):
            figures.append(fig)
            return original(fig, path)

        monkeypatch.setattr(module, "save_figure", keep)
    return figures


def _points(shift: str) -> list[ModelPoint]:
    models = {name: ("dual-encoder", acc) for name, acc in DUALS.items()} | OTHERS
    rng = np.random.default_rng(len(shift))
    return [ModelPoint(name, group, acc, float(np.clip(acc - SHIFT_DROP[shift] + rng.normal(0, 0.03), 0.02, 0.98)),
                       200, 200) for name, (group, acc) in models.items()]


def zoo_results() -> dict:
    """A `demo robustness --zoo` results.json: two shifts, four dual encoders, two VLMs, one
    embedding model."""
    shifts = {}
    for shift in SHIFT_DROP:
        points = _points(shift)
        fit_all = fit_robustness(points, ref="clean", shift=shift, n_boot=50)
        dual = fit_robustness(points, ref="clean", shift=shift, baseline="dual-encoder", n_boot=50)
        shifts[shift] = ZooShift(shift, fit_all, dual, None, None, [])
    members = [ZooMember(p.model, p.family, p.model, "") for p in _points("noisy")]
    results = ZooRobustnessResults(quick=True, seconds=1.0, suite="fashion-test", reference="clean", k_options=10,
                                   n_questions=200, members=members, results_csv="results.csv", shifts=shifts,
                                   task_signal_model="zoo:x", task_signal={})
    return json.loads(json.dumps(results.to_dict()))


def test_the_zoo_lines_show_each_shifts_dual_encoder_line_and_every_member(drawn, tmp_path):
    path = draw_image("zoo-robustness-fits", zoo_results(), tmp_path)
    assert path == tmp_path / "zoo-robustness-fits.png" and path.read_bytes().startswith(PNG_MAGIC)
    panels = [ax for ax in drawn[0].axes if ax.axison]
    assert [ax.get_title().split(":")[0] for ax in panels] == list(SHIFT_DROP)
    for ax, shift in zip(panels, SHIFT_DROP):
        points = {p.model: p for p in _points(shift)}
        duals = [points[name] for name in DUALS]
        line = stats.linregress(stats.norm.ppf([p.acc_ref for p in duals]), stats.norm.ppf([p.acc_shift for p in duals]))
        fitted = next(x for x in ax.get_lines() if x.get_label() == "line over dual-encoder")
        np.testing.assert_allclose(fitted.get_ydata(), line.slope * fitted.get_xdata() + line.intercept)
        groups = {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}
        assert list(groups) == ["dual-encoder", "embedding", "vlm"]  # sorted: one style per group in every plot
        assert len({c.lines[0].get_marker() for c in groups.values()}) == 3  # one marker per group
        vlms = [points[name] for name in ("vlm-a", "vlm-b")]
        np.testing.assert_allclose(groups["vlm"].lines[0].get_xydata(),
                                   stats.norm.ppf([[p.acc_ref, p.acc_shift] for p in vlms]))


def _wilson(correct: int, n: int) -> tuple[float, float]:
    """The Wilson score interval in closed form."""
    p = correct / n
    centre, half = p + Z**2 / (2 * n), Z * np.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2))
    return (centre - half) / (1 + Z**2 / n), (centre + half) / (1 + Z**2 / n)


CORRECT = {(0, "zero-shot"): (40, 10), (1, "random"): (45, 12), (2, "random"): (50, 20),
           (1, "same-domain"): (60, 8), (2, "same-domain"): (70, 5)}  # (clean, rotated) of 100 each


def icl_results() -> dict:
    rows = []
    for (k, policy), (clean, rotated) in CORRECT.items():
        for domain, correct, n in (("clean", clean, 100), ("rotated", rotated, 100), ("all", clean + rotated, 200)):
            rows.append({"shots": k, "policy": policy, "domain": domain, "n": n, "correct": correct,
                         "accuracy": correct / n, "gain": None, "cost": None})
    return {"config": {"model": "zoo:x"}, "rows": rows}


def test_the_in_context_curves_start_at_zero_shot_with_wilson_intervals(drawn, tmp_path):
    path = draw_image("icl-domains:x", icl_results(), tmp_path)
    assert path == tmp_path / "icl-domains-x.png" and path.read_bytes().startswith(PNG_MAGIC)
    panels = drawn[0].axes
    assert [ax.get_title() for ax in panels] == ["clean", "rotated", "all"]
    clean = {c.get_label(): c for c in panels[0].containers}
    assert list(clean) == ["random", "same-domain"]
    for policy, curve in clean.items():
        counts = [CORRECT[(0, "zero-shot")][0], *(CORRECT[(k, policy)][0] for k in (1, 2))]
        x, y = curve.lines[0].get_xdata(), curve.lines[0].get_ydata()
        np.testing.assert_allclose(np.round(x), [0, 1, 2])  # nudged apart, not moved off their k
        np.testing.assert_allclose(y, np.array(counts) / 100)
        ends = np.array([seg[:, 1] for seg in curve.lines[2][0].get_segments()])
        np.testing.assert_allclose(ends, [_wilson(c, 100) for c in counts])


def test_the_defined_label_bars_are_each_cells_accuracy_over_chance(drawn, tmp_path):
    records = [{"trial": t, "demos": cell, "correct": t % div == 0}
               for cell, div in (("none", 2), ("clean", 1), ("rotated", 3)) for t in range(30)]
    summary = defined_labels_summary(records, "clean", ways=4)
    summary["config"] = {"model": "zoo:x", "query_domain": "clean"}
    path = draw_image("icl-defined-labels:x", json.loads(json.dumps(summary)), tmp_path)
    assert path.read_bytes().startswith(PNG_MAGIC)
    ax = drawn[0].axes[0]
    np.testing.assert_allclose([b.get_height() for b in ax.patches], [15 / 30, 30 / 30, 10 / 30])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["none", "clean", "rotated"]
    chance = next(x for x in ax.get_lines() if x.get_label() == "chance")
    np.testing.assert_allclose(chance.get_ydata(), [0.25, 0.25])


def _study_rows(seed: int, gap: float) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"id": f"{env}{i}", "env": env, "ood": ood, "scores": {"exact": float(rng.random() < (0.8 - gap * ood))},
             "prediction": "p", "target": "t", "instruction": "q"}
            for env, ood in (("a", False), ("b", False), ("c", True)) for i in range(20)]


def test_the_study_pictures_are_its_id_ood_bars_and_heatmap(drawn, tmp_path):
    rows = {"erm": {s: _study_rows(s, 0.3) for s in (0, 1)}, "birm": {s: _study_rows(10 + s, 0.1) for s in (0, 1)}}
    scores = aggregate_study(rows, ["exact"])
    results = StudyResults(scores, {m: MethodRuns(m, {}, {}) for m in rows}, [0, 1], {}).to_dict()
    assert draw_image("zoo-tasks", results, tmp_path).read_bytes().startswith(PNG_MAGIC)
    bars = drawn[0].axes[0]
    means = {f"{method} {split}": np.mean([np.mean([r["scores"]["exact"] for r in seed_rows
                                                    if r["ood"] == (split == "OOD")]) for seed_rows in by_seed.values()])
             for method, by_seed in rows.items() for split in ("ID", "OOD")}  # envs of equal size: macro = pooled
    assert [t.get_text() for t in bars.get_xticklabels()] == list(means)
    np.testing.assert_allclose([b.get_height() for b in bars.patches], list(means.values()))
    assert draw_image("zoo-tasks-envs", results, tmp_path).read_bytes().startswith(PNG_MAGIC)
    cells = drawn[1].axes[0].images[0].get_array()
    erm_c = np.mean([np.mean([r["scores"]["exact"] for r in rows["erm"][s] if r["env"] == "c"]) for s in (0, 1)])
    assert cells.shape == (2, 3) and cells[0, 2] == pytest.approx(erm_c)


def test_every_picture_has_a_test_here():
    tested = {"zoo-robustness-fits", "icl-domains", "icl-defined-labels", "zoo-tasks", "zoo-tasks-envs"}
    elsewhere = {"ladder", "ladder-zoo", "reward-matrix", "reward-zoo-matrix", "invariance"}  # their demos' tests
    assert set(IMAGES) == tested | elsewhere
