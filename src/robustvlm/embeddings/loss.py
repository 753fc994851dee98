"""InfoNCE over in-batch negatives (VLM2Vec, CLIP's image-to-text half).

Query i's positive is target i; every other target of the batch is a negative. With unit-norm
embeddings the score is the cosine similarity divided by the temperature tau:

    loss = mean_i [ -log( exp(q_i . t_i / tau) / sum_j exp(q_i . t_j / tau) ) ]

Targets that are the same text as query i's own target (`groups`) are not negatives of it: two
images answered "seven" must not be pushed apart from each other's answer (with few distinct
answers, as in VQA, most of a batch would otherwise be such false negatives). Such columns are
left out of row i's denominator; target i itself stays.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from robustvlm.errors import ConfigError


def info_nce(
    queries: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float = 0.02,
    groups: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean InfoNCE loss (nats) of queries [B, D] against targets [B, D] (row i's positive is
    target i; unit-norm rows expected, the scores are dot products / temperature).

    Args:
        groups: [B] integer ids; targets with the id of row i's target, other than target i,
            are left out of row i's denominator. None: every other target is a negative.
    """
    if queries.ndim != 2 or queries.shape != targets.shape:
        raise ConfigError(f"queries and targets must both be [B, D]; got {tuple(queries.shape)} and {tuple(targets.shape)}")
    if temperature <= 0:
        raise ConfigError(f"temperature must be > 0, got {temperature}")
    logits = queries.float() @ targets.float().T / temperature  # [B, B]
    rows = torch.arange(len(queries), device=logits.device)
    if groups is not None:
        groups = groups.to(logits.device)
        same = groups[:, None] == groups[None, :]
        same[rows, rows] = False
        logits = logits.masked_fill(same, float("-inf"))
    return F.cross_entropy(logits, rows)
