"""Generation rows: a VLM's greedy answers to evaluation records, scored by the per-batch metrics.

A record is asked as one chat prompt (`data.collate.chat_messages`: its image, then its
instruction), the same for a local and a served model (`Backend.generate_chats`).

A row is what predictions.jsonl holds: {"id", "env", "ood", "instruction", "prediction",
"target", "scores": {metric: value}}; the after-generation metrics (BERTScore, CEE) are added to
the rows later (`metrics.registry.add_after_generation_scores`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from robustvlm.config import EvalConfig
from robustvlm.data.collate import chat_messages
from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.evaluation.metrics.registry import per_batch_metrics
from robustvlm.models.backends import Backend
from robustvlm.models.chat import ChatPrompt


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


def example_prompt(ex: Example) -> ChatPrompt:
    """The chat prompt of an evaluation record: its image (if any), then its instruction."""
    images = [load_image(ex.image, source=ex.source, record=ex.id)] if ex.image is not None else []
    return ChatPrompt(chat_messages(ex.instruction, image=ex.image is not None), images, record=ex.id)


def generation_rows(backend: Backend, examples: Sequence[Example], cfg: EvalConfig) -> Iterator[list[dict]]:
    """Generate for `examples` in batches of `cfg.batch_size`; yield each batch's scored rows."""
    metrics = per_batch_metrics()
    for start in range(0, len(examples), cfg.batch_size):
        chunk = examples[start : start + cfg.batch_size]
        predictions = backend.generate_chats(
            [example_prompt(ex) for ex in chunk],
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
