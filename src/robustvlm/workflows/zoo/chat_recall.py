"""Associative recall in the chat layout: the bridge from raw-token recall to defined-label episodes.

Copying emerges in raw recall (`recall`: `k1 v1 k2 v2 k1 ?`), where the value follows its key at
once; in a defined-label episode the answer follows its key (the class named in the user turn)
after a question of about 20 tokens and the turn markers, and the raw skill does not carry over by
itself (docs/results/zoo-ii.md). A chat-recall sequence puts each pair in the episodes' own turns,
as token ids:

    <user header> k1 <question> <end of turn> <assistant header> v1 <end of turn> ...

- keys and values are raw tokens drawn per sequence as in `recall` (2 to `MAX_KEYS` keys, each
  assigned a value, `N_PAIRS` bursty pairs), from pools that leave out every token of the turn
  markers and of the questions, so a key is told apart from the text around it by what it is;
- the gap between a key and its value is the last `gap` tokens of a defined-label episode's
  question (one of `data.QUESTIONS` with 2-4 allowed words, one per sequence) followed by the
  turn markers; `gap` grows linearly from 0 (the value right after its key, raw recall inside a
  user turn) at the stage's first step to the whole question and markers at `GROWTH` of its
  steps (`ChatRecall.fraction`), so the reply slot after the assistant header appears one token
  at a time;
- the value of every pair whose key appeared earlier in the sequence is labelled, and the curve
  (`recall.ContextCurve`) logs them against the set-only level, as in `recall`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from robustvlm.data.collate import IGNORE_INDEX
from robustvlm.workflows.zoo.data import (
    LABEL_WORDS,
    QUESTIONS,
    assistant_turn,
    user_turn,
    with_allowed_words,
)
from robustvlm.workflows.zoo.recall import ContextCurve, RecallPools, labelled_token_scores

#: Keys per chat-recall sequence (2..MAX_KEYS, as the episodes' ways) and pairs per sequence:
#: fewer than raw recall's (8, 24), since a pair takes up to about 60 tokens here instead of 2.
MAX_KEYS = 4
N_PAIRS = 8
#: The share of the stage's steps over which the gap grows to a whole question.
GROWTH = 0.5
KEY_SLOT, VALUE_SLOT = "KEYSLOT", "VALUESLOT"


@dataclass(frozen=True)
class ChatLayout:
    """Token ids of a pair's turn markers (`before_key`: the user header; `after_gap`: end of the
    user turn and the assistant header; `after_value`: end of the assistant turn), each question's
    ids (`questions`: ". " then a question of a defined-label episode with its 2-4 allowed words,
    as it follows a named item), the key and value pools
    (no token of the markers or questions) and the pad id."""

    before_key: list[int]
    after_gap: list[int]
    after_value: list[int]
    questions: list[list[int]]
    pools: RecallPools
    pad: int

    @classmethod
    def of_processor(cls, processor: Any) -> ChatLayout:
        """The layout of `processor`'s chat template and tokenizer."""
        tokenizer = processor.tokenizer
        text = processor.apply_chat_template([user_turn(KEY_SLOT, 0), assistant_turn(VALUE_SLOT)], tokenize=False)
        head, rest = text.split(KEY_SLOT)
        middle, tail = rest.split(VALUE_SLOT)

        def ids(piece: str) -> list[int]:
            return list(tokenizer(piece, add_special_tokens=False)["input_ids"])

        before_key, after_gap, after_value = ids(head), ids(middle), ids(tail)
        questions = [ids(f". {with_allowed_words(q, LABEL_WORDS[:n])}") for q in QUESTIONS
                     for n in range(2, len(LABEL_WORDS) + 1)]
        used = {i for part in (before_key, after_gap, after_value, *questions) for i in part}
        free = np.array([i for i in range(len(tokenizer)) if i not in used | set(tokenizer.all_special_ids)],
                        dtype=np.int64)
        return cls(before_key, after_gap, after_value, questions, RecallPools(free[0::2], free[1::2], None),
                   tokenizer.pad_token_id)


def chat_recall_batch(layout: ChatLayout, rng: np.random.Generator, batch_size: int, fraction: float, *,
                      max_keys: int = MAX_KEYS, n_pairs: int = N_PAIRS,
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`batch_size` chat-recall sequences whose gaps are the last `ceil(fraction * len)` tokens of
    each sequence's question followed by the turn markers: input ids [B, T] (right-padded with the pad id), attention mask
    [B, T], labels [B, T] (IGNORE_INDEX but the values of repeated keys) and the set-only level of
    each labelled value [n_labelled] (log of the distinct keys seen before it), row-major."""
    rows, labelled, levels = [], [], []
    for _ in range(batch_size):
        n_keys = int(rng.integers(2, max_keys + 1))
        keys = rng.choice(layout.pools.keys, n_keys, replace=False)
        values = rng.choice(layout.pools.values, n_keys, replace=False)
        between = [*layout.questions[int(rng.integers(len(layout.questions)))], *layout.after_gap]
        gap = between[len(between) - math.ceil(fraction * len(between)):]
        ids: list[int] = []
        lab: list[int] = []
        seen: set[int] = set()
        for j in (int(j) for j in rng.integers(n_keys, size=n_pairs)):
            prompt = [*layout.before_key, int(keys[j]), *gap]
            ids += [*prompt, int(values[j]), *layout.after_value]
            lab += [IGNORE_INDEX] * len(prompt) + [int(values[j]) if j in seen else IGNORE_INDEX]
            lab += [IGNORE_INDEX] * len(layout.after_value)
            if j in seen:
                levels.append(math.log(len(seen)))
            seen.add(j)
        rows.append(ids)
        labelled.append(lab)
    width = max(len(r) for r in rows)
    input_ids = torch.tensor([r + [layout.pad] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    labels = torch.tensor([r + [IGNORE_INDEX] * (width - len(r)) for r in labelled])
    return input_ids, mask, labels, torch.tensor(levels, dtype=torch.float64)


@dataclass
class ChatRecall:
    """The chat-recall stage's objective over `steps` steps: `__call__(rng)` draws one batch of
    `batch_size` sequences at the step's gap (`fraction`), logs it to `curve` and returns its mean
    labelled loss."""

    model: torch.nn.Module
    layout: ChatLayout
    curve: ContextCurve
    batch_size: int
    steps: int
    step: int = 0

    def fraction(self) -> float:
        """The share of the question and markers in the gap at the current step: 0 at the first
        step, growing linearly to 1 at `GROWTH` of the steps."""
        return min(1.0, self.step / max(1.0, GROWTH * self.steps))

    def __call__(self, rng: np.random.Generator) -> torch.Tensor:
        ids, mask, labels, levels = chat_recall_batch(self.layout, rng, self.batch_size, self.fraction())
        self.step += 1
        hf: Any = self.model  # a transformers model
        out = hf(input_ids=ids, attention_mask=mask, labels=labels)
        nll, correct = labelled_token_scores(out.logits.detach(), labels)
        self.curve.add(nll, correct, levels)
        return out.loss
