"""Per-environment statistics of a batch, summed over all processes.

Every nonlinear quantity the invariance objectives use (environment risks, their variance,
squared gradients) is built from per-environment *sums* and *counts*. Under
`torch.distributed` (world size > 1) those sums are all-reduced with an autograd-aware
all-reduce before any nonlinearity, so each process sees the statistics of the global batch;
with DDP's gradient averaging the parameter gradients then equal those of one process
holding the whole global batch (the all-reduce's backward sums the identical upstream
gradients of the W processes, and DDP divides by W).

The global batch is the concatenation of the local batches in rank order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn

from robustvlm.errors import DataError
from robustvlm.models.outputs import AnswerOutputs


def world() -> tuple[int, int]:
    """(rank, world size) of this process; (0, 1) when torch.distributed is not in use."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def global_sums(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """Sum each tensor over all processes in one autograd-aware all-reduce.

    Args:
        tensors: tensors of one floating dtype and device, any shapes.

    Returns:
        The summed tensors (the inputs themselves in a single process).
    """
    if world()[1] == 1:
        return list(tensors)
    flat = torch.cat([t.reshape(-1) for t in tensors])
    flat = dist_fn.all_reduce(flat, op=dist.ReduceOp.SUM)
    return [part.view_as(t) for part, t in zip(flat.split([t.numel() for t in tensors]), tensors)]


def group_sum(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    """[G, ...] sums of the rows of `values` [N, ...] by `group` [N] (long in [0, G))."""
    out = values.new_zeros((num_groups, *values.shape[1:]))
    return out.index_add(0, group, values)


def group_count(group: torch.Tensor, num_groups: int, dtype: torch.dtype) -> torch.Tensor:
    """[G] number of rows in each group, as `dtype`."""
    return torch.bincount(group, minlength=num_groups).to(dtype)


def stats_dtype(out: AnswerOutputs) -> torch.dtype:
    """Dtype of all statistics: float32 at least, float64 when the logits are float64."""
    return torch.promote_types(out.logits.dtype, torch.float32)


def check_env_ids(env: torch.Tensor, num_envs: int) -> None:
    """Raise DataError when a token's environment id is outside [0, num_envs)."""
    if env.numel() and (int(env.min()) < 0 or int(env.max()) >= num_envs):
        raise DataError(
            f"batch holds environment ids {sorted(set(env.tolist()))} but the objective was "
            f"built for {num_envs} training environment(s) (ids 0..{num_envs - 1})",
            source="AnswerOutputs.env",
        )


@dataclass
class EnvRisks:
    """Environment risks R^e of the global batch.

    Attributes:
        risks: [E] mean token risk of each environment (`AnswerOutputs.token_risk`: nats for
            cross-entropy, target units squared for squared error; 0 where absent).
        counts: [E] answer tokens of each environment in the global batch.
    """

    risks: torch.Tensor
    counts: torch.Tensor

    @property
    def present(self) -> torch.Tensor:
        """[E] bool, environments with at least one answer token in the global batch."""
        return self.counts > 0

    def empirical_risk(self) -> torch.Tensor:
        """R_emp: the mean of the risks of the environments present in the batch (scalar)."""
        return self.risks[self.present].mean()

    def named(self, env_names: list[str]) -> dict[str, float]:
        """{environment name: risk} for the environments present."""
        values = self.risks.detach().tolist()
        return {name: values[i] for i, name in enumerate(env_names) if self.counts[i] > 0}


def reduce_env_stats(
    out: AnswerOutputs, num_envs: int, *extra: torch.Tensor, token_risk: torch.Tensor | None = None
) -> tuple[EnvRisks, list[torch.Tensor]]:
    """Global environment risks, plus global sums of `extra` local sums, in one all-reduce.

    Args:
        out: the local batch's answer outputs.
        num_envs: E, the number of training environments.
        extra: further local per-group sums (dtype `stats_dtype(out)`) to sum globally.
        token_risk: [N] token risk when already computed (default `out.token_risk()`).

    Returns:
        (EnvRisks, the summed `extra` tensors in order).
    """
    check_env_ids(out.env, num_envs)
    risk = (out.token_risk() if token_risk is None else token_risk).to(stats_dtype(out))
    risk_sum, counts, *extra_sums = global_sums(
        group_sum(risk, out.env, num_envs), group_count(out.env, num_envs, risk.dtype), *extra
    )
    if not bool((counts > 0).any()):
        raise DataError("the batch holds no answer tokens", source="AnswerOutputs")
    return EnvRisks(risk_sum / counts.clamp(min=1), counts), extra_sums


def split_examples_in_halves(
    out: AnswerOutputs, num_envs: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Assign every example to half 0 or 1 of its environment, alternating in batch order.

    The order is that of the global batch (rank 0's examples first), so the split does not
    depend on how the batch is spread over processes.

    Returns:
        half: [N] long, the half (0/1) of each token's example.
        examples: [E] number of examples of each environment in the global batch (float).
    """
    dtype = stats_dtype(out)
    n_examples = int(out.example.max()) + 1 if out.example.numel() else 0
    example_env = torch.full((n_examples,), -1, dtype=torch.long, device=out.env.device)
    example_env[out.example] = out.env
    member = torch.nn.functional.one_hot(example_env.clamp(min=0), num_envs)
    member = member * (example_env >= 0).unsqueeze(1)  # [B, E]; examples without tokens: none
    position = member.cumsum(0) - 1  # position of each example among its env's local examples
    rank, world_size = world()
    table = torch.zeros(world_size, num_envs, dtype=dtype, device=out.env.device)
    table[rank] = member.sum(0).to(dtype)
    (table,) = global_sums(table)
    offset = table[:rank].sum(0).long()
    order = position.gather(1, example_env.clamp(min=0).unsqueeze(1)).squeeze(1)
    example_half = (order + offset[example_env.clamp(min=0)]) % 2
    return example_half[out.example], table.sum(0)
