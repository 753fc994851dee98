"""Gradient caching (GradCache, Gao et al. 2021): the full-batch contrastive gradient with the
memory of one chunk, on one device or several.

An in-batch loss couples every query with every target, so the batch cannot be cut into
micro-batches whose gradients add up. But the loss depends on the parameters only through the
embeddings, so by the chain rule dL/dtheta = sum_i (dL/de_i) . (de_i/dtheta). Hence:

1. embed every chunk of queries and of targets without an autograd graph, remembering the
   random-number state each chunk started from;
2. compute the loss on the embeddings (all-gathered across processes by `loss_fn`) and its
   gradient with respect to this process's embeddings: the cache, one [n, D] block per chunk;
3. run each chunk again with its random state replayed, so dropout draws the very masks of
   step 1, and back-propagate sum(embeddings * cached gradient): each chunk adds its share of
   dL/dtheta, and only one chunk's activations are alive at a time.

Step 3 runs the target chunks first and the query chunks last, all but the last chunk inside
`no_sync`, so data-parallel replicas synchronise once per micro-batch, on a chunk that uses the
whole model (queries hold images; text-only targets leave the vision side unused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.checkpoint import get_device_states, set_device_states

from robustvlm.errors import ConfigError

Batch = dict[str, Any]


@dataclass
class RngState:
    """The CPU and accelerator random-number states at one moment."""

    cpu: torch.Tensor
    devices: list[int]
    device_states: list[torch.Tensor]

    @classmethod
    def capture(cls, *tensors: Any) -> RngState:
        """The current states: the CPU's and those of the accelerators `tensors` live on."""
        devices, states = get_device_states(*[t for t in tensors if torch.is_tensor(t)])
        return cls(torch.get_rng_state(), devices, states)

    @contextmanager
    def replay(self) -> Iterator[None]:
        """Run the block from this state; the states outside the block are left as they were."""
        with torch.random.fork_rng(devices=self.devices):
            torch.set_rng_state(self.cpu)
            set_device_states(self.devices, self.device_states)
            yield


def batch_size(batch: Batch) -> int:
    """Rows of a collated batch (its `input_ids`)."""
    return len(batch["input_ids"])


def _pixel_ranges(batch: Batch, starts: list[int], image_token_id: int | None) -> list[tuple[int, int]] | None:
    """Row ranges of `pixel_values` per chunk when they are flattened over the batch, else None.

    Qwen-VL: [sum of patches, dim] with `image_grid_thw` [images, 3], one image per row.
    InternVL: [sum of tiles, 3, H, W], each tile `image_token_id` tokens: a row's share of the
    pixel rows is its share of the image tokens."""
    pixels, n = batch.get("pixel_values"), batch_size(batch)
    grid = batch.get("image_grid_thw")
    if pixels is None or (grid is None and len(pixels) == n):
        return None
    if grid is not None:
        if len(grid) != n:
            raise ConfigError("gradient caching needs one image per query when pixel values are flattened")
        per_row = grid.prod(dim=1)
    else:
        if image_token_id is None:
            raise ConfigError(f"{len(pixels)} pixel rows for {n} queries: gradient caching needs the image token "
                              "to split them")
        tokens = (batch["input_ids"] == image_token_id).sum(dim=1)
        if int(tokens.sum()) % len(pixels):
            raise ConfigError(f"{int(tokens.sum())} image tokens do not split evenly over {len(pixels)} pixel rows")
        per_row = tokens // (int(tokens.sum()) // len(pixels))
    ends = torch.cumsum(per_row, dim=0).tolist()
    bounds = [0, *[int(ends[s - 1]) for s in starts[1:]], int(ends[-1])]
    return list(zip(bounds[:-1], bounds[1:]))


def split_batch(batch: Batch, chunk_size: int, image_token_id: int | None = None) -> list[Batch]:
    """Consecutive chunks of at most `chunk_size` rows of a collated, right-padded batch.

    Tensors with a leading batch axis are sliced; token tensors [B, T] lose the trailing
    columns that are padding in every row of the chunk; flattened pixel values are cut at
    their images' boundaries (`image_token_id`: the processor's, needed to split InternVL's
    tiles). Non-tensors are sliced when they are per-row lists, else kept.
    """
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be >= 1, got {chunk_size}")
    n = batch_size(batch)
    starts = list(range(0, n, chunk_size))
    pixels = _pixel_ranges(batch, starts, image_token_id)
    mask = batch["attention_mask"]
    if (mask[:, 1:] > mask[:, :-1]).any():
        raise ConfigError("split_batch needs right-padded batches (a padding column precedes a real token)")
    chunks = []
    for i, start in enumerate(starts):
        stop = min(start + chunk_size, n)
        width = int(mask[start:stop].sum(dim=1).max())
        chunk: Batch = {}
        for key, value in batch.items():
            if pixels is not None and key == "pixel_values":
                chunk[key] = value[pixels[i][0] : pixels[i][1]]
            elif torch.is_tensor(value) and value.ndim >= 2 and value.shape[:2] == mask.shape:
                chunk[key] = value[start:stop, :width]
            elif (torch.is_tensor(value) and value.ndim >= 1 and len(value) == n) or (
                isinstance(value, list) and len(value) == n
            ):
                chunk[key] = value[start:stop]
            else:
                chunk[key] = value
        chunks.append(chunk)
    return chunks


def _embed_without_graph(
    embed: Callable[[Batch], torch.Tensor], chunks: list[Batch]
) -> tuple[list[torch.Tensor], list[RngState]]:
    """(embeddings, random states) of every chunk, no autograd graph kept."""
    embeddings, states = [], []
    for chunk in chunks:
        states.append(RngState.capture(*chunk.values()))
        with torch.no_grad():
            embeddings.append(embed(chunk).detach())
    return embeddings, states


def cached_backward(
    embed: Callable[[Batch], torch.Tensor],
    queries: Batch,
    targets: Batch,
    *,
    chunk_size: int,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    backward: Callable[[torch.Tensor], None],
    no_sync: Callable[[], AbstractContextManager],
    image_token_id: int | None = None,
) -> float:
    """Accumulate the gradient of `loss_fn(query embeddings, target embeddings)` into the
    parameters, chunk by chunk (see the module doc); returns the loss.

    Args:
        embed: one chunk -> embeddings [n, D] (the model's forward).
        queries, targets: collated batches with the same number of rows.
        chunk_size: rows per forward pass.
        loss_fn: this process's query and target embeddings [B, D] -> the scalar loss (it may
            all-gather them across processes).
        backward: back-propagates a scalar (e.g. the loop's `ctx.backward`, times any scale).
        no_sync: a context in which data-parallel gradients are not synchronised.
        image_token_id: the processor's image token (`split_batch`).
    """
    if batch_size(queries) != batch_size(targets):
        raise ConfigError(f"{batch_size(queries)} queries but {batch_size(targets)} targets")
    sides = [split_batch(side, chunk_size, image_token_id) for side in (queries, targets)]
    embedded = [_embed_without_graph(embed, chunks) for chunks in sides]
    leaves = [torch.cat(side_embeddings).requires_grad_() for side_embeddings, _ in embedded]
    loss = loss_fn(*leaves)
    caches = torch.autograd.grad(loss, leaves)
    replays = []  # (chunk, its random state, its cached gradient), targets first
    for side in (1, 0):
        grads = torch.split(caches[side], [len(e) for e in embedded[side][0]])
        replays += list(zip(sides[side], embedded[side][1], grads))
    for i, (chunk, state, grad) in enumerate(replays):
        last = i == len(replays) - 1
        with state.replay(), (nullcontext() if last else no_sync()):
            surrogate = torch.sum(embed(chunk).float() * grad.float())
            backward(surrogate)
    return float(loss.detach())
