"""The VLM rungs' collated rows are kept between runs in a worker: the same rows as collating
afresh, reused for the same pictures, made again for other pictures."""

from __future__ import annotations

import numpy as np
import torch

from robustvlm.experiments.ladder import vlm as ladder_vlm
from robustvlm.experiments.ladder.rung import Rung
from robustvlm.experiments.ladder.vlm import answer_rows, build_vlm, environment_rows

ENVS = {"train-0.9": 0, "train-0.8": 1}


def _data(seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    inputs = {name: rng.random((3, 2 * 14 * 14)).astype(np.float32) for name in (*ENVS, "test-reversed")}
    return inputs, {name: rng.integers(0, 2, 3) for name in inputs}


def test_kept_rows_equal_fresh_ones_and_follow_the_pictures(monkeypatch):
    monkeypatch.setattr(ladder_vlm, "_KEPT_ROWS", {})
    _, processor = build_vlm(Rung.parse("vlm:full:tiny:idefics3"), 0, "fashion", 16)
    _, other_seed = build_vlm(Rung.parse("vlm:full:tiny:idefics3"), 1, "fashion", 16)
    inputs, labels = _data(0)
    kept = environment_rows(processor, "fashion", 16, inputs, labels, ENVS)
    for name in inputs:
        fresh = answer_rows(other_seed, "fashion", inputs[name], labels[name], ENVS, name)
        assert kept[name].batch.keys() == fresh.batch.keys()
        assert all(torch.equal(kept[name].batch[k], fresh.batch[k]) for k in fresh.batch)
        assert torch.equal(kept[name].candidates, fresh.candidates)
    assert environment_rows(processor, "fashion", 16, inputs, labels, ENVS) is kept
    grey, grey_labels = _data(1)
    assert environment_rows(processor, "fashion", 16, grey, grey_labels, ENVS) is not kept
    third, third_labels = _data(2)
    environment_rows(processor, "fashion", 16, third, third_labels, ENVS)
    assert len(ladder_vlm._KEPT_ROWS) == ladder_vlm.KEPT_ROWS  # the oldest pictures' rows dropped
    assert environment_rows(processor, "fashion", 16, inputs, labels, ENVS) is not kept
