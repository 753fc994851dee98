"""What a VLM forward pass hands to the training objectives."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class AnswerOutputs:
    """Model outputs at the answer positions only (N = answer tokens in the local batch).

    Position t of a sequence predicts token t+1; only positions whose next token is an
    answer token (label != -100) are kept, so logits are never formed at image tokens.

    Attributes:
        logits: [N, V] float32 logits (h @ W.T).
        targets: [N] long, the answer token each position must predict.
        example: [N] long, index of the example within the local batch.
        env: [N] long, environment id of each position.
        hidden: [N, d] features h (final hidden state before the LM head).
        classifier: [V, d] the LM head weight W (no bias).
    """

    logits: torch.Tensor
    targets: torch.Tensor
    example: torch.Tensor
    env: torch.Tensor
    hidden: torch.Tensor
    classifier: torch.Tensor

    def token_ce(self) -> torch.Tensor:
        """[N] per-token cross-entropy (nats)."""
        return torch.nn.functional.cross_entropy(self.logits, self.targets, reduction="none")
