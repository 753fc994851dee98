"""All-gather of embeddings across processes, the local shard keeping its gradient (VLM2Vec).

Every process then holds the embeddings of the whole global batch: its own rows as the tensors
it computed (gradients flow back into its model), the other processes' rows as constants. Each
process computes the same global loss; the gradient of its own rows is the part of the global
gradient that its model replica owns. Data-parallel training averages the replicas' gradients,
so a process back-propagates `world_size` x the loss to obtain the gradient of the global loss
(`loss_scale`).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) without an initialised process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def loss_scale() -> int:
    """The factor a process multiplies the global loss by before its backward pass (the world
    size: undoes the data-parallel average of the replicas' gradients)."""
    return world()[1]


def gather_with_local_grad(local: torch.Tensor) -> torch.Tensor:
    """Every process's rows [n_0 + n_1 + ..., ...] in rank order; rows may differ in count per
    process. This process's rows are `local` itself (with its autograd graph), the others'
    detached copies. Without a process group: `local` unchanged."""
    rank, size = world()
    if size == 1:
        return local
    counts = [torch.zeros(1, dtype=torch.long, device=local.device) for _ in range(size)]
    dist.all_gather(counts, torch.tensor([len(local)], device=local.device))
    longest = int(max(c.item() for c in counts))
    padded = torch.zeros((longest, *local.shape[1:]), dtype=local.dtype, device=local.device)
    padded[: len(local)] = local.detach()
    parts = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(parts, padded.contiguous())
    rows = [part[: int(c.item())] for part, c in zip(parts, counts)]
    rows[rank] = local
    return torch.cat(rows)
