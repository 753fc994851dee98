"""What a VLM forward pass hands to the training objectives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Risk = Literal["ce", "squared"]
"""The per-token loss: cross-entropy over classes, or squared error of one real output."""


@dataclass
class AnswerOutputs:
    """Model outputs at the answer positions only (N = answer tokens in the local batch).

    Position t of a sequence predicts token t+1; only positions whose next token is an
    answer token (label != -100) are kept, so logits are never formed at image tokens.

    Attributes:
        logits: [N, V] float32 logits (h @ W.T); with `risk="squared"`, [N, 1] predictions.
        targets: [N] long, the answer token each position must predict; with
            `risk="squared"`, [N] real-valued targets (the dtype of the logits).
        example: [N] long, index of the example within the local batch.
        env: [N] long, environment id of each position.
        hidden: [N, d] features h (final hidden state before the LM head).
        classifier: [V, d] the LM head weight W (no bias).
        risk: the per-token loss every objective uses: "ce" (cross-entropy, the VLM case) or
            "squared" ((prediction - target)^2, a one-output regression such as the linear
            unit tests' Example1).
    """

    logits: torch.Tensor
    targets: torch.Tensor
    example: torch.Tensor
    env: torch.Tensor
    hidden: torch.Tensor
    classifier: torch.Tensor
    risk: Risk = "ce"

    def __post_init__(self) -> None:
        if self.risk not in ("ce", "squared"):
            raise ValueError(f"risk must be 'ce' or 'squared', got {self.risk!r}")
        if self.risk == "squared" and (self.logits.dim() != 2 or self.logits.shape[1] != 1):
            raise ValueError(f"risk 'squared' needs [N, 1] predictions, got {tuple(self.logits.shape)}")

    def token_ce(self) -> torch.Tensor:
        """[N] per-token cross-entropy (nats)."""
        return torch.nn.functional.cross_entropy(self.logits, self.targets, reduction="none")

    def token_risk(self) -> torch.Tensor:
        """[N] per-token loss under `risk`: cross-entropy (nats) or squared error (target units^2)."""
        if self.risk == "squared":
            return (self.logits[:, 0] - self.targets).square()
        return self.token_ce()


def restrict_to_candidates(out: AnswerOutputs, candidates: torch.Tensor) -> AnswerOutputs:
    """The outputs at the positions whose target is one of `candidates` [K] (token ids of the
    answers' first tokens), with the logits of those K tokens only: logits [n, K], targets [n]
    the target's index in `candidates`, classifier [K, d] (its rows). The cross-entropy is then
    the K-way one between the answers, and a scale on the logits (IRMv1, BIRM) scales only
    their differences: the IRM paper's binary classifier when K = 2. Positions of other tokens
    (the end-of-turn token, later tokens of a long answer) are dropped."""
    if out.risk != "ce":
        raise ValueError("restrict_to_candidates needs cross-entropy outputs")
    candidates = candidates.to(out.targets.device)
    match = out.targets[:, None] == candidates[None]  # [N, K]
    keep = match.any(1)
    return AnswerOutputs(
        logits=out.logits[keep][:, candidates],
        targets=match[keep].long().argmax(1),
        example=out.example[keep],
        env=out.env[keep],
        hidden=out.hidden[keep],
        classifier=out.classifier[candidates],
    )
