"""Subset lines and the held-out worst-subset search on a constructed case whose answer is known:
three classes of shifted questions follow the models' ability, one class is coin flips."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from robustvlm.analysis.subset_lines import question_scores, subset_lines, worst_subset

CLASSES = ("cat", "dog", "cow", "noise")


def _constructed(seed: int = 0, models: int = 80, per_class: int = 100) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """ID accuracy Phi(a) for ability a; a question of a real class is right with probability
    Phi(a - d), d its difficulty; a `noise` question is right with probability 1/2 whatever a."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0.0, 0.8, models)
    id_acc = sps.norm.cdf(ability)
    columns, labels = [], []
    for name in CLASSES:
        if name == "noise":
            p = np.full((models, per_class), 0.5)
        else:
            p = sps.norm.cdf(ability[:, None] - rng.normal(0.3, 0.4, per_class)[None, :])
        columns.append(rng.random((models, per_class)) < p)
        labels += [name] * per_class
    return id_acc, np.hstack(columns).astype(float), labels


def test_the_coin_flip_class_has_no_line_and_the_others_do():
    id_acc, correct, labels = _constructed()
    result = subset_lines(id_acc, correct, labels, n_boot=500)
    by_name = {s.subset: s for s in result.subsets}
    assert by_name["noise"].line.r2 < 0.1 and by_name["noise"].slope_ci[0] < 0 < by_name["noise"].slope_ci[1]
    assert all(by_name[c].line.r2 > 0.9 for c in CLASSES[:3])
    assert not by_name["noise"].shares_slope
    # the share is the questions of the subsets whose interval holds the average slope
    expected = sum(s.questions for s in result.subsets if s.slope_ci[0] <= result.average.slope <= s.slope_ci[1])
    assert result.share_on_average_slope == expected / correct.shape[1] <= 0.75


def test_where_every_class_follows_one_line_all_of_the_shifted_set_shares_its_slope():
    id_acc, correct, labels = _constructed(seed=2)
    keep = [i for i, label in enumerate(labels) if label != "noise"]
    result = subset_lines(id_acc, correct[:, keep], [labels[i] for i in keep], n_boot=500)
    assert result.share_on_average_slope == 1.0


def test_the_held_out_search_finds_the_coin_flips_and_reports_them_honestly():
    id_acc, correct, labels = _constructed(seed=1)
    found = worst_subset(id_acc, correct, fraction=0.25, seed=0)
    noise = {i for i, label in enumerate(labels) if label == "noise"}
    precision = len(noise & set(found.questions)) / len(found.questions)
    assert precision > 0.8
    # a few real questions slip in, so the chosen set keeps a weak line; the rest keeps the strong one
    assert found.held_out_r2 < 0.5 < 0.9 < found.held_out_rest_r2
    assert found.held_out_slope < 0.25 < found.held_out_all_r2
    assert set(found.search_models).isdisjoint(found.held_out_models)
    assert found.search_r2 <= found.held_out_rest_r2


def test_the_search_on_pure_noise_is_not_fooled_by_its_own_selection():
    """With every question a coin flip, the search half still finds a 'worst' subset; the held-out
    half shows it is no worse than the rest."""
    rng = np.random.default_rng(4)
    id_acc = rng.uniform(0.2, 0.8, 60)
    correct = (rng.random((60, 400)) < 0.5).astype(float)
    found = worst_subset(id_acc, correct, fraction=0.25, seed=0)
    assert found.held_out_r2 < 0.3 and found.held_out_rest_r2 < 0.3


def test_question_scores_are_pearson_correlations():
    rng = np.random.default_rng(5)
    tx, correct = rng.normal(size=30), (rng.random((30, 6)) < 0.5).astype(float)
    correct[:, 5] = 1.0
    scores = question_scores(tx, correct)
    assert np.isnan(scores[5])
    assert scores[:5] == pytest.approx([sps.pearsonr(tx, correct[:, j])[0] for j in range(5)])
