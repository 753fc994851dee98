"""Associative recall: the text-only first stage of the zoo's in-context curriculum.

Copying from the context (the induction step) appears in small transformers only after a plateau,
and only with data in which items recur within a context and their labels change per sequence
(Chan et al. 2022; Olsson et al. 2022). A recall sequence is exactly that, in raw tokens:

    BOS k1 v1 k2 v2 k1 v1 k3 v3 k2 v2 ...        (`recall_batch`)

- per sequence, `n_keys` keys (2 to `max_keys`) are drawn from a key pool and each is assigned a
  value drawn from a value pool: no key has a value outside its sequence, so only the context
  tells (the pools: the decoder's non-special tokens, alternately keys and values, about 250 each
  for the zoo's 512-token vocabulary: many rare classes);
- the stream holds `n_pairs` pairs whose keys are drawn at random from the sequence's keys:
  bursty repeats, each key about `n_pairs / n_keys` times;
- the value of every pair whose key appeared earlier in the sequence is labelled (the first
  occurrence's value cannot be known).

Three reference levels of the labelled loss (nats): `log(value pool)` for a model that knows
only the pool; the *set-only* level, the mean over labelled pairs of `log(distinct keys seen
before)`, for a model that knows which values this sequence holds but not which key has which
(the best without binding); 0 for copying. The curve (`ContextCurve`) logs, per window of steps,
the labelled loss, the accuracy of the most likely token and the reference level (here the
set-only level); copying has **emerged** at the first window whose loss is below half its level
(`emergence_step`). The curriculum's picture episodes log the same curve over the first token of
each labelled reply, with the level log(allowed words): a model that knows the allowed words but
not which one the context assigns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from robustvlm.data.collate import IGNORE_INDEX

#: The curriculum's recall sequences: keys per sequence (2..MAX_KEYS) and pairs per sequence.
MAX_KEYS = 8
N_PAIRS = 24


@dataclass(frozen=True)
class RecallPools:
    """Disjoint token ids keys and values are drawn from (each a 1-D int64 array)."""

    keys: np.ndarray
    values: np.ndarray
    bos: int | None

    @classmethod
    def of_tokenizer(cls, tokenizer: Any) -> RecallPools:
        """Every non-special token of `tokenizer`, alternately a key and a value."""
        special = set(tokenizer.all_special_ids)
        ids = np.array([i for i in range(len(tokenizer)) if i not in special], dtype=np.int64)
        return cls(ids[0::2], ids[1::2], tokenizer.bos_token_id)


def recall_batch(pools: RecallPools, rng: np.random.Generator, batch_size: int, *, max_keys: int = MAX_KEYS,
                 n_pairs: int = N_PAIRS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`batch_size` recall sequences: input ids [B, T] (T = 2 n_pairs, plus 1 with a BOS), labels
    [B, T] (IGNORE_INDEX except the values of repeated keys) and the set-only level of each
    labelled value [n_labelled] (log of the distinct keys seen before it), in row-major order."""
    rows, labels, levels = [], [], []
    for _ in range(batch_size):
        n_keys = int(rng.integers(2, max_keys + 1))
        keys = rng.choice(pools.keys, n_keys, replace=False)
        values = rng.choice(pools.values, n_keys, replace=False)
        stream = rng.integers(n_keys, size=n_pairs)
        ids = [] if pools.bos is None else [pools.bos]
        lab = [] if pools.bos is None else [IGNORE_INDEX]
        seen: set[int] = set()
        for j in stream:
            ids += [int(keys[j]), int(values[j])]
            lab += [IGNORE_INDEX, int(values[j]) if j in seen else IGNORE_INDEX]
            if j in seen:
                levels.append(math.log(len(seen)))
            seen.add(int(j))
        rows.append(ids)
        labels.append(lab)
    return torch.tensor(rows), torch.tensor(labels), torch.tensor(levels, dtype=torch.float64)


def labelled_token_scores(logits: torch.Tensor, labels: torch.Tensor, *,
                          first_only: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per labelled token (row-major order; `first_only`: only those whose previous token is
    unlabelled, the first of each reply): its negative log-likelihood (nats) and whether it is
    the most likely token, each predicted by the logits one position before. `logits` [B, T, V],
    `labels` [B, T] (IGNORE_INDEX where unlabelled); returns two [n] tensors."""
    target = labels[:, 1:]
    mask = target != IGNORE_INDEX
    if first_only:
        mask = mask & (labels[:, :-1] == IGNORE_INDEX)
    scores = logits[:, :-1][mask].float()
    nll = -torch.log_softmax(scores, dim=-1).gather(-1, target[mask][:, None])[:, 0]
    return nll, scores.argmax(-1) == target[mask]


@dataclass
class ContextCurve:
    """Collects each step's labelled loss, accuracy and reference level; `curve` holds one row per
    `every` steps: {step, loss, accuracy, level}."""

    every: int
    window: list[tuple[float, float, float]] = field(default_factory=list)
    curve: list[dict] = field(default_factory=list)

    def add(self, nll: torch.Tensor, correct: torch.Tensor, levels: torch.Tensor) -> None:
        self.window.append((float(nll.mean()), float(correct.float().mean()), float(levels.mean())))
        if len(self.window) == self.every:
            loss, accuracy, level = np.mean(self.window, axis=0)
            self.curve.append({"step": (len(self.curve) + 1) * self.every, "loss": round(float(loss), 4),
                               "accuracy": round(float(accuracy), 4), "level": round(float(level), 4)})
            self.window.clear()

    def report(self) -> dict:
        """{"curve": ..., "emergence_step": the first step whose window's loss is below half its
        level, or None}."""
        return {"curve": self.curve, "emergence_step": emergence_step(self.curve)}


def emergence_step(curve: list[dict]) -> int | None:
    """The first step of `curve` whose loss is below half its level (None: never)."""
    return next((row["step"] for row in curve if row["loss"] < 0.5 * row["level"]), None)


def recall_loss(model: torch.nn.Module, pools: RecallPools, monitor: ContextCurve, batch_size: int,
                rng: np.random.Generator) -> torch.Tensor:
    """One recall batch's mean labelled loss through `model` (a causal LM or a VLM on text
    only), logged to `monitor`."""
    ids, labels, levels = recall_batch(pools, rng, batch_size)
    hf: Any = model  # a transformers model
    out = hf(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
    nll, correct = labelled_token_scores(out.logits.detach(), labels)
    monitor.add(nll, correct, levels)
    return out.loss
