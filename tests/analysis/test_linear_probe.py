"""Linear probes: the fit, the subsample, option choice against direct scores."""

from __future__ import annotations

import numpy as np
import pytest

from robustvlm.analysis.linear_probe import fit_probe
from robustvlm.errors import DataError


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    labels = np.array(["a", "b", "c"] * 20)
    centres = {"a": 0.0, "b": 2.0, "c": 4.0}
    features = np.stack([rng.normal(centres[y], 1.0, size=5) for y in labels])
    return features, labels


def test_choice_is_the_best_scoring_option(data):
    features, labels = data
    probe = fit_probe(features, labels)
    scores = probe.scores(features[:4])
    options = [["a", "c"], ["b", "a", "c"], ["c", "b"], ["b", "a"]]
    expected = [int(np.argmax([scores[i, probe.classes.index(o)] for o in opts])) for i, opts in enumerate(options)]
    assert probe.choose(features[:4], options) == expected
    assert np.mean(probe.head.predict((features - probe.mean) / probe.scale) == labels) > 0.8
    with pytest.raises(DataError, match="no class of the probe"):
        probe.choose(features[:1], [["a", "z"]])


def test_subsample_holds_every_class_and_depends_on_the_seed(data):
    features, labels = data
    small = fit_probe(features, labels, n_train=3, seed=1)
    assert small.classes == ["a", "b", "c"]
    assert not np.allclose(small.mean, fit_probe(features, labels, n_train=3, seed=2).mean)
    with pytest.raises(DataError, match="n_train"):
        fit_probe(features, labels, n_train=2)


def test_two_classes_give_two_columns(data):
    features, labels = data
    keep = labels != "c"
    probe = fit_probe(features[keep], labels[keep])
    assert probe.scores(features[:3]).shape == (3, 2)
    assert probe.choose(features[:1], [["b", "a"]]) == [1]
