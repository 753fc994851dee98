"""Batch samplers that are deterministic per (seed, epoch), split over ranks, and resumable.

Both samplers plan the *global* batches of an epoch from (seed, epoch) alone; each rank
yields its own slice of each global batch (contiguous: the global batch is the
concatenation of the rank slices in rank order). `state_dict()` holds the epoch and the
number of batches already handed out, so a run resumed mid-epoch gets exactly the batches
it had not seen. Pass them to `torch.utils.data.DataLoader(batch_sampler=...)`.

`position` counts batches handed out by `__iter__`; a DataLoader that prefetches pulls a few
ahead of the training loop, so a trainer should checkpoint
`{"epoch": epoch, "position": batches_consumed}` from its own counters.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from robustvlm.errors import ConfigError


class ResumableBatchSampler(Sampler[list[int]]):
    """Epoch/position bookkeeping and rank slicing; subclasses implement `_plan(epoch)`."""

    def __init__(self, *, seed: int, rank: int, world_size: int):
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(
                f"sampler: need 0 <= rank < world_size, got rank={rank}, world_size={world_size}"
            )
        self.seed = int(seed)
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.position = 0
        self.report: list[str] = []
        self._plans: dict[int, list[list[int]]] = {}

    def _plan(self, epoch: int) -> list[list[int]]:
        """The global batches of an epoch (dataset indices), a pure function of (seed, epoch)."""
        raise NotImplementedError

    def _rng(self, epoch: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, epoch])

    def _note(self, message: str) -> None:
        """Record (once) and warn about examples a plan cannot use."""
        if message not in self.report:
            self.report.append(message)
            warnings.warn(message, stacklevel=3)

    def global_batches(self, epoch: int) -> list[list[int]]:
        """The global batches of `epoch`, each the concatenation of the rank slices."""
        if epoch not in self._plans:
            self._plans = {epoch: [self._ordered(b) for b in self._plan(epoch)]}
        return self._plans[epoch]

    def _ordered(self, batch: list[int]) -> list[int]:
        """Deal the batch round-robin over ranks, then lay the rank slices end to end."""
        return [i for r in range(self.world_size) for i in batch[r :: self.world_size]]

    def _rank_slice(self, batch: list[int]) -> list[int]:
        sizes = [len(range(r, len(batch), self.world_size)) for r in range(self.world_size)]
        start = sum(sizes[: self.rank])
        return batch[start : start + sizes[self.rank]]

    def set_epoch(self, epoch: int) -> None:
        """Move to `epoch` (from its first batch unless it is already the current epoch)."""
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.global_batches(self.epoch)
        while self.position < len(batches):
            batch = batches[self.position]
            self.position += 1
            yield self._rank_slice(batch)
        self.epoch, self.position = self.epoch + 1, 0

    def __len__(self) -> int:
        """Batches per epoch (the same on every rank)."""
        return len(self.global_batches(self.epoch))

    def state_dict(self) -> dict[str, Any]:
        """{"epoch", "position" (batches of the epoch already handed out), "seed"}."""
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at (epoch, position); the seed must match the saved one."""
        if int(state["seed"]) != self.seed:
            raise ConfigError(
                f"sampler: checkpoint was made with seed {state['seed']}, this run uses {self.seed}"
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


class EnvBalancedBatchSampler(ResumableBatchSampler):
    """Global batches of `per_env` examples from each of `envs_per_batch` environments.

    Each epoch every environment's examples are shuffled and cut into chunks of `per_env`;
    each batch takes one chunk from each of the `envs_per_batch` environments with the most
    chunks left (so with fewer environments per batch than there are, large environments
    appear in more batches), until fewer than `envs_per_batch` environments have chunks left;
    the batch order is then shuffled. Examples that fit no batch are listed in `.report`
    (and warned), never dropped silently.

    Args:
        envs: environment id of every dataset example (index i -> envs[i]).
        per_env: examples per environment per global batch.
        envs_per_batch: environments per global batch (>= 2); None: every environment with
            at least `per_env` examples.
        seed, rank, world_size: shuffling seed; this process and the number of processes.
    """

    def __init__(
        self,
        envs: list[int],
        *,
        per_env: int,
        envs_per_batch: int | None = None,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ):
        super().__init__(seed=seed, rank=rank, world_size=world_size)
        if per_env < 1:
            raise ConfigError(f"sampler: per_env must be >= 1, got {per_env}")
        members: dict[int, list[int]] = {}
        for index, env in enumerate(envs):
            members.setdefault(int(env), []).append(index)
        self.members = {e: np.asarray(ix) for e, ix in sorted(members.items())}
        self.per_env = per_env
        usable = [e for e, ix in self.members.items() if len(ix) >= per_env]
        for e, ix in self.members.items():
            if len(ix) < per_env:
                self._note(
                    f"environment {e} has {len(ix)} example(s), fewer than per_env={per_env}: "
                    "it is in no batch"
                )
        self.envs_per_batch = len(usable) if envs_per_batch is None else envs_per_batch
        if self.envs_per_batch < 2 or self.envs_per_batch > len(usable):
            raise ConfigError(
                f"sampler: need 2 <= envs_per_batch <= {len(usable)} (environments with at least "
                f"per_env={per_env} examples, of {len(self.members)}), got {self.envs_per_batch}"
            )
        if (per_env * self.envs_per_batch) % world_size:
            raise ConfigError(
                f"sampler: global batch of {per_env} x {self.envs_per_batch} examples does not "
                f"split evenly over {world_size} processes"
            )
        self._usable = usable
        self.global_batches(0)

    def _plan(self, epoch: int) -> list[list[int]]:
        rng = self._rng(epoch)
        chunks = {}
        for e in self._usable:
            n_chunks = len(self.members[e]) // self.per_env
            shuffled = rng.permutation(self.members[e])[: n_chunks * self.per_env]
            chunks[e] = shuffled.reshape(n_chunks, self.per_env)
        priority = {e: p for p, e in enumerate(rng.permutation(self._usable).tolist())}
        used = dict.fromkeys(self._usable, 0)
        batches = []
        while True:
            open_envs = [e for e in self._usable if used[e] < len(chunks[e])]
            if len(open_envs) < self.envs_per_batch:
                break
            open_envs.sort(key=lambda e: (used[e] - len(chunks[e]), priority[e]))
            chosen = sorted(open_envs[: self.envs_per_batch])
            batches.append([int(i) for e in chosen for i in chunks[e][used[e]]])
            for e in chosen:
                used[e] += 1
        for e in self._usable:
            left = len(self.members[e]) - used[e] * self.per_env
            if left:
                self._note(
                    f"environment {e}: {left} of {len(self.members[e])} examples fit no batch "
                    f"in an epoch (a different random subset each epoch)"
                )
        return [batches[i] for i in rng.permutation(len(batches))]


class ShuffleBatchSampler(ResumableBatchSampler):
    """Shuffled global batches of `batch_size` examples over `n` examples (for plain ERM).

    The last global batch may be smaller; if it holds fewer examples than there are
    processes (a rank would get none) those examples are reported in `.report` and left out.
    """

    def __init__(
        self, n: int, *, batch_size: int, seed: int = 0, rank: int = 0, world_size: int = 1
    ):
        super().__init__(seed=seed, rank=rank, world_size=world_size)
        if n < world_size or batch_size < world_size:
            raise ConfigError(
                f"sampler: need n >= world_size and batch_size >= world_size, got n={n}, "
                f"batch_size={batch_size}, world_size={world_size}"
            )
        self.n = n
        self.batch_size = batch_size
        self.global_batches(0)

    def _plan(self, epoch: int) -> list[list[int]]:
        order = self._rng(epoch).permutation(self.n).tolist()
        batches = [order[i : i + self.batch_size] for i in range(0, self.n, self.batch_size)]
        if len(batches[-1]) < self.world_size:
            self._note(
                f"{len(batches[-1])} example(s) per epoch left out: the last batch would give "
                f"some of the {self.world_size} processes nothing"
            )
            batches.pop()
        return batches
