"""Worker for objectives/test_distributed_penalty.py: the objectives on one rank's half of a global batch.

Run under `torchrun --nproc_per_node 2 tests/helpers/distributed_objectives_worker.py OUT.pt`; rank 0
saves the loss parts and the rank-averaged parameter gradients (as DDP would average them).
The test imports `run_all` to compute the same on the whole batch in a single process.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives import build_objective

ENVS = ["general", "reasoning", "ocr"]
VOCAB, WIDTH = 13, 6
TOKENS = (3, 1, 2, 4, 2, 3, 1, 2, 5, 2)  # answer tokens of the 10 examples of the global batch
EXAMPLE_ENV = (0, 1, 0, 0, 1, 1, 2, 0, 1, 1)  # env 2 has one example (on rank 1)
CASES = {
    "irm": ("irm", {}),
    "vrex": ("vrex", {}),
    "groupdro": ("groupdro", {"eta": 0.5}),
    "birm": ("birm", {"prior_sd": 0.2}),
    "birm_vocab": ("birm", {"prior_sd": 0.2, "scope": "vocab", "n_samples": 3}),
    "dynamic_birm": ("dynamic_birm", {"k_skip": 0, "prior_sd": 0.2}),
}
STEPS = (1000, 1001)


def local_batch(rank: int, world_size: int) -> tuple[torch.Tensor, AnswerOutputs]:
    """Features [n, WIDTH] and answer targets of this rank's contiguous share of the examples."""
    g = torch.Generator().manual_seed(0)
    example = torch.repeat_interleave(torch.arange(len(TOKENS)), torch.tensor(TOKENS))
    features = torch.randn(len(example), WIDTH, generator=g, dtype=torch.float64)
    targets = torch.randint(0, VOCAB, (len(example),), generator=g)
    per_rank = len(TOKENS) // world_size
    keep = (example >= rank * per_rank) & (example < (rank + 1) * per_rank)
    out = AnswerOutputs(
        logits=torch.empty(0),
        targets=targets[keep],
        example=example[keep] - rank * per_rank,
        env=torch.tensor(EXAMPLE_ENV)[example[keep]],
        hidden=features[keep],
        classifier=torch.empty(0),
    )
    return features[keep], out


def run_all(rank: int, world_size: int) -> dict[str, list[dict[str, object]]]:
    """Two steps of each case: logged parts and (rank-averaged) gradients of a linear head."""
    features, out = local_batch(rank, world_size)
    results = {}
    for label, (method, hparams) in CASES.items():
        torch.manual_seed(1)
        head = torch.nn.Linear(WIDTH, VOCAB, dtype=torch.float64)
        objective = build_objective(method, ENVS, hparams)
        steps = []
        for step in STEPS:
            out.logits = head(features)
            parts = objective(out, step)
            head.zero_grad()
            parts.loss.backward()
            grads = [p.grad.clone() for p in head.parameters()]
            if dist.is_initialized():  # what DDP does: average the gradients over ranks
                for grad in grads:
                    dist.all_reduce(grad)
                    grad /= dist.get_world_size()
            steps.append({"row": parts.log_row(), "grads": grads})
        results[label] = steps
    return results


def main(path: str) -> None:
    dist.init_process_group("gloo")
    results = run_all(dist.get_rank(), dist.get_world_size())
    if dist.get_rank() == 0:
        torch.save(results, path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
