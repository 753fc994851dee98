"""Generation rows: a VLM's greedy answers to evaluation records, scored by the per-batch metrics.

A row is what predictions.jsonl holds: {"id", "env", "ood", "instruction", "prediction",
"target", "scores": {metric: value}}; the after-generation metrics (BERTScore, CEE) are added to
the rows later (`metrics.registry.add_after_generation_scores`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from robustvlm.config import EvalConfig
from robustvlm.data.collate import VLMCollator
from robustvlm.data.records import Example
from robustvlm.evaluation.metrics.registry import per_batch_metrics
from robustvlm.models.generate import generate_batch


def select_examples(
    examples: Sequence[Example], split: str, max_per_env: int | None = None
) -> list[Example]:
    """Records of `split`, optionally the first `max_per_env` of each environment."""
    seen: dict[str, int] = {}
    picked = []
    for ex in examples:
        if ex.split != split or (max_per_env is not None and seen.get(ex.env, 0) >= max_per_env):
            continue
        seen[ex.env] = seen.get(ex.env, 0) + 1
        picked.append(ex)
    return picked


def generation_rows(
    model: torch.nn.Module, processor: Any, examples: Sequence[Example], cfg: EvalConfig
) -> Iterator[list[dict]]:
    """Generate for `examples` in batches of `cfg.batch_size`; yield each batch's scored rows."""
    collator = VLMCollator(processor, {}, train=False)
    metrics = per_batch_metrics()
    for start in range(0, len(examples), cfg.batch_size):
        chunk = examples[start : start + cfg.batch_size]
        predictions = generate_batch(
            model,
            processor,
            collator(chunk),
            max_new_tokens=cfg.max_new_tokens,
            repetition_penalty=cfg.repetition_penalty,
        )
        references = [ex.target for ex in chunk]
        scores = {m.name: m.score(predictions, references) for m in metrics}
        yield [
            {
                "id": ex.id,
                "env": ex.env,
                "ood": ex.ood,
                "instruction": ex.instruction,
                "prediction": pred,
                "target": ex.target,
                "scores": {name: values[i] for name, values in scores.items()},
            }
            for i, (ex, pred) in enumerate(zip(chunk, predictions))
        ]
