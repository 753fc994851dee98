"""Batch samplers: balance, determinism, exact mid-epoch resume, rank slices, reporting."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from robustvlm.errors import ConfigError
from robustvlm.training.sampler import EnvBalancedBatchSampler, ShuffleBatchSampler

# 4 environments of uneven size; env 3 is too small for per_env=4.
ENVS = [0] * 23 + [1] * 17 + [2] * 40 + [3] * 3


def balanced(**kw) -> EnvBalancedBatchSampler:
    with pytest.warns(UserWarning):
        return EnvBalancedBatchSampler(ENVS, per_env=kw.pop("per_env", 4), **kw)


def test_every_batch_holds_per_env_examples_of_distinct_environments():
    for envs_per_batch in (None, 2):
        sampler = balanced(envs_per_batch=envs_per_batch, seed=1)
        batches = list(sampler)
        assert len(batches) == len(sampler) > 0
        k = 3 if envs_per_batch is None else 2
        for batch in batches:
            counts = Counter(ENVS[i] for i in batch)
            assert len(counts) == k and set(counts.values()) == {4}
        flat = [i for b in batches for i in b]
        assert len(flat) == len(set(flat)), "no example twice in an epoch"


def test_unusable_examples_are_reported_not_dropped_silently():
    sampler = balanced(envs_per_batch=None)
    # all 3 usable envs per batch: 17 // 4 = 4 batches, so env 0 leaves 7, env 1 1, env 2 24.
    assert len(sampler) == 4
    joined = "\n".join(sampler.report)
    assert "environment 3 has 3 example(s)" in joined
    for env, left in ((0, 7), (1, 1), (2, 24)):
        assert f"environment {env}: {left} of" in joined
    used = Counter(ENVS[i] for b in sampler for i in b)
    assert used == {0: 16, 1: 16, 2: 16}


def test_two_envs_per_batch_uses_large_environments_more():
    sampler = balanced(envs_per_batch=2)
    used = Counter(ENVS[i] for b in sampler for i in b)
    # chunks 5, 4, 10: greedy pairing uses all 19 but one chunk -> 9 batches.
    assert len(sampler) == 9 and sum(used.values()) == 9 * 8
    assert used[2] == 9 * 4


def test_plan_is_deterministic_per_seed_and_epoch():
    a, b, c = balanced(seed=5), balanced(seed=5), balanced(seed=6)
    epoch0 = list(a)
    assert epoch0 == list(b)
    assert epoch0 != list(c)
    b.set_epoch(1)
    assert list(b) != epoch0
    assert list(a) == list(balanced(seed=5).global_batches(1)), "iteration advances to epoch 1"


@pytest.mark.parametrize(
    "make",
    [
        lambda: balanced(envs_per_batch=2, seed=3),
        lambda: ShuffleBatchSampler(50, batch_size=8, seed=3),
    ],
)
def test_resume_mid_epoch_reproduces_the_remaining_batches(make):
    straight = make()
    straight.set_epoch(2)
    expected = list(straight)
    interrupted = make()
    interrupted.set_epoch(2)
    it = iter(interrupted)
    seen = [next(it) for _ in range(3)]
    state = interrupted.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # a trainer re-entering the epoch keeps the position
    assert seen + list(resumed) == expected
    assert resumed.state_dict()["epoch"] == 3


@pytest.mark.parametrize("world_size", [2, 4])
def test_rank_slices_partition_the_global_batch(world_size):
    per_rank = [balanced(seed=9, rank=r, world_size=world_size) for r in range(world_size)]
    reference = balanced(seed=9)
    global_batches = reference.global_batches(0)
    for step, slices in enumerate(zip(*per_rank)):
        assert [i for s in slices for i in s] == per_rank[0].global_batches(0)[step]
        assert sorted(i for s in slices for i in s) == sorted(global_batches[step])
        for s in slices:  # per_env 4 over 2 or 4 ranks: every rank gets every environment
            assert set(Counter(ENVS[i] for i in s).values()) == {4 // world_size}


def test_shuffle_sampler_covers_every_example_once_per_epoch():
    ranks = [ShuffleBatchSampler(21, batch_size=6, seed=0, rank=r, world_size=2) for r in range(2)]
    seen = [i for batches in zip(*ranks) for s in batches for i in s]
    assert sorted(seen) == list(range(21)) and not ranks[0].report
    last_two = ShuffleBatchSampler(14, batch_size=6, seed=0, rank=1, world_size=2)
    assert [len(b) for b in last_two] == [3, 3, 1] and last_two.report == []
    with pytest.warns(UserWarning, match="1 example"):
        dropped = ShuffleBatchSampler(13, batch_size=4, seed=0, world_size=2)
    assert len(dropped) == 3 and "1 example(s) per epoch left out" in dropped.report[0]


def test_works_as_a_dataloader_batch_sampler():
    data = torch.arange(len(ENVS))
    loader = torch.utils.data.DataLoader(data, batch_sampler=balanced(seed=2))
    batches = [b.tolist() for b in loader]
    assert batches == balanced(seed=2).global_batches(0)


def test_bad_settings_raise_config_error():
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match="envs_per_batch"):
        EnvBalancedBatchSampler([0] * 8 + [1] * 2, per_env=4)
    with pytest.raises(ConfigError, match="split evenly"):
        EnvBalancedBatchSampler([0] * 8 + [1] * 8, per_env=3, world_size=4)
    with pytest.raises(ConfigError, match="rank"):
        ShuffleBatchSampler(10, batch_size=4, rank=2, world_size=2)
    sampler = ShuffleBatchSampler(10, batch_size=4, seed=1)
    with pytest.raises(ConfigError, match="seed"):
        sampler.load_state_dict({"epoch": 0, "position": 1, "seed": 2})
